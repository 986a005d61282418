"""The key names every component agrees on (the same as TorchRL's)."""

OBSERVATION = "observation"
PIXELS = "pixels"
ACTION = "action"
REWARD = "reward"
DONE = "done"
TERMINATED = "terminated"
TRUNCATED = "truncated"
NEXT = "next"
RESET = "_reset"
IS_INIT = "is_init"
SAMPLE_LOG_PROB = "sample_log_prob"
STATE_VALUE = "state_value"
ADVANTAGE = "advantage"
VALUE_TARGET = "value_target"
TRAJ_IDS = ("collector", "traj_ids")
DONE_KEYS = (DONE, TERMINATED, TRUNCATED)
