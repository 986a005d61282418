# %% [markdown]
# # The command line, the Trainer, checkpoints and resume
#
# Three ways to train, from the least code to the most control:
#
# 1. `torchrl-lite train ALGO --env ID`: a recipe, a run folder, `eval --video` and
#    `--resume`;
# 2. `Trainer`: your own modules, the loop and its hooks provided, a CSV logger;
# 3. your own loop (the other notebooks).
#
# The question this notebook answers last: is a run that was stopped and resumed from
# its checkpoint the same as one that ran straight through? The claim: every loss of the
# resumed run equals the uninterrupted run's, to the last bit.

# %%
import csv
import json
import os
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import Image, Video, display
from tensordict.nn import TensorDictSequential
from torch import nn

from torchrl_lite.cli import main as torchrl_lite
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import GymEnv, RewardSum, TransformedEnv
from torchrl_lite.modules import MLP, EGreedyModule, QValueActor
from torchrl_lite.objectives import DQNLoss, HardUpdate
from torchrl_lite.record import CSVLogger
from torchrl_lite.trainers import LogReward, ReplayBufferTrainer, Trainer

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
# the files this notebook writes go to a fresh folder (the test suite sets its own)
WORK = os.environ.get("TORCHRL_LITE_WORKDIR") or tempfile.mkdtemp(prefix="torchrl_lite_10_")
os.chdir(WORK)
CLI_FRAMES = 2_048 if SMOKE else 40_960  # PPO on Pendulum; the recipe solves it in ~40k
BATCHES, STOP_AT = (6, 3) if SMOKE else (40, 17)  # Trainer run: batches, checkpoint after
FPB = 64  # frames per batch of the Trainer run
EVAL_EPISODES = 1 if SMOKE else 5
codes = []  # exit codes of the command-line calls

# %% [markdown]
# ## 1. The command line
#
# `torchrl-lite train ppo --env Pendulum-v1 --frames N --out runs/ppo` trains the PPO
# recipe and writes a run folder: `config.json`, `checkpoint/`, `logs/metrics.csv`,
# `episodes.csv`, `learning_curve.png`. Here the same `main` the shell command calls is
# called with the same arguments (no second Python start-up).

# %%
code = torchrl_lite(
    ["train", "ppo", "--env", "Pendulum-v1", "--frames", str(CLI_FRAMES), "--out", "runs/ppo"]
    + ["--quiet"]
)
codes.append(code)
print("exit code", code, sorted(p.name for p in Path("runs/ppo").iterdir()))
display(Image(filename="runs/ppo/learning_curve.png"))

# %% [markdown]
# `eval DIR --episodes N --video out.mp4` loads the checkpoint, plays the deterministic
# policy and prints the mean return; `--video` records the episodes.

# %%
code = torchrl_lite(["eval", "runs/ppo", "--episodes", str(EVAL_EPISODES), "--video", "ppo.mp4"])
codes.append(code)
display(Video("ppo.mp4", embed=True, html_attributes="controls loop muted"))

# %% [markdown]
# `train --resume DIR key=value` continues the run from its last checkpoint (the config
# is read from the folder; here the frame budget is raised by half).

# %%
code = torchrl_lite(["train", "--resume", "runs/ppo", f"frames={CLI_FRAMES * 3 // 2}", "--quiet"])
codes.append(code)
print(json.loads(Path("runs/ppo/summary.json").read_text()))

# %% [markdown]
# ## 2. The Trainer, its hooks and a CSV logger
#
# `Trainer` runs collect, process, optimise, log and checkpoint; hooks plug into named
# stages: `ReplayBufferTrainer` extends a buffer with each batch and samples it for each
# optimisation step, `LogReward` logs the training reward, the target-network update runs
# after each optimiser step and the exploration annealing after each batch. With
# `save_trainer_file` the Trainer checkpoints everything (modules, optimiser, buffer,
# collector and env state, hook state, random generators) atomically.
#
# `build` makes a whole DQN run from a seed; a forward hook on the loss module records
# every loss it returns.


# %%
def build(batches: int, checkpoint=None, seed: int = 0, log_dir=None):
    torch.manual_seed(seed)
    env = TransformedEnv(GymEnv("CartPole-v1"), RewardSum())
    env.set_seed(seed)
    qnet = QValueActor(
        MLP(4, 2, num_cells=[64, 64], activation_class=nn.ReLU), spec=env.action_spec
    )
    explore = EGreedyModule(env.action_spec, eps_init=1.0, eps_end=0.05, annealing_num_steps=2_000)
    loss = DQNLoss(qnet, gamma=0.99, delay_value=True, double_dqn=True)
    collector = SyncDataCollector(
        env, TensorDictSequential(qnet, explore), frames_per_batch=FPB, total_frames=-1
    )
    logger = CSVLogger("dqn", log_dir=log_dir) if log_dir else None
    trainer = Trainer(
        collector=collector,
        total_frames=batches * FPB,
        optim_steps_per_batch=8,
        loss_module=loss,
        optimizer=torch.optim.Adam(loss.parameters(), lr=1e-3),
        logger=logger,
        clip_norm=10.0,
        progress_bar=False,
        log_interval=FPB,
        save_trainer_file=checkpoint,
        save_trainer_interval=10**9,  # saved at the end of train() only
    )
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(10_000))
    ReplayBufferTrainer(buffer, batch_size=32).register(trainer)
    LogReward().register(trainer)
    trainer.register_op("post_optim", HardUpdate(loss, value_network_update_interval=32).step)
    trainer.register_op("post_steps", explore.step, frames=FPB)
    losses = []
    loss.register_forward_hook(lambda module, args, out: losses.append(out["loss"].detach()))
    return trainer, losses


trainer, straight = build(BATCHES, log_dir="logs")
trainer.train()
trainer.logger.close()
print(trainer.collected_frames, "frames,", trainer.optim_count, "optimiser steps")

# %% [markdown]
# The CSV logger wrote one column per logged name, one row per log interval:

# %%
with open("logs/dqn/metrics.csv") as file:
    rows = list(csv.DictReader(file))
print(list(rows[0]))
fig, ax = plt.subplots(figsize=(6, 3.5))
steps = [int(r["step"]) for r in rows]
ax.plot(steps, [float(r["loss"]) for r in rows], "o-", ms=3, label="loss")
ax2 = ax.twinx()
ax2.plot(
    steps, [float(r["r_training"]) for r in rows], "o-", ms=3, color="C1", label="training reward"
)
ax.set(xlabel="frames", ylabel="DQN loss", title="Trainer + CSVLogger (logs/dqn/metrics.csv)")
ax2.set_ylabel("mean reward per step")
fig.legend(loc="upper right")
plt.show()

# %% [markdown]
# ## 3. Stop, resume, compare
#
# The same run again, stopped after `STOP_AT` batches (the checkpoint is written when
# `train()` ends), then rebuilt from scratch with another seed (the checkpoint must win),
# loaded and trained to the end. Its losses, joined to the first part's, are compared
# with the straight run's.

# %%
first, first_losses = build(STOP_AT, checkpoint="ckpt")
first.train()
resumed, resumed_losses = build(BATCHES, checkpoint="ckpt", seed=123)
resumed.load()
print("resumed at", resumed.collected_frames, "frames")
resumed.train()
joined = first_losses + resumed_losses
print(len(straight), "losses straight,", len(joined), "stopped + resumed")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(torch.stack(straight).tolist(), marker=".", lw=3, alpha=0.4, label="uninterrupted")
ax.plot(torch.stack(joined).tolist(), marker=".", lw=1, label="stopped + resumed")
ax.axvline(len(first_losses), color="k", linestyle="--", label="checkpoint")
ax.set(xlabel="optimiser step", ylabel="DQN loss", yscale="log")
ax.legend()
plt.show()

# %% [markdown]
# ## The claim
#
# The resumed run's losses are the uninterrupted run's, exactly.

# %%
same_length = len(joined) == len(straight)
diff = (torch.stack(joined) - torch.stack(straight)).abs().max().item() if same_length else 1e9
result = {
    "metric": "max_abs_loss_diff_resumed",
    "value": diff,
    "target": 0.0,
    "optim_steps": len(straight),
    "cli_exit_codes": codes,
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert same_length and diff == 0.0 and codes == [0, 0, 0], result
