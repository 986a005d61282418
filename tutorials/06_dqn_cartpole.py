# %% [markdown]
# # DQN on CartPole, to 475
#
# CartPole-v1 pays +1 per step the pole stays up, for at most 500 steps; the usual bar
# for "solved" is a mean return of 475. This notebook trains a deep Q-network to that bar
# with a plain loop: a Q-network and its greedy policy, epsilon-greedy exploration, a
# replay buffer, double DQN with a Huber loss, and a target network copied at intervals.
# It ends with the learning curve against the target line, a filmstrip of the greedy
# policy balancing the pole, and a check that 10 greedy evaluation episodes average at
# least 475.
#
# The values are those of the `dqn` recipe (`torchrl_lite/recipes/dqn.py`, what
# `torchrl-lite train dqn` runs). With `TORCHRL_LITE_SMOKE=1` (the test suite) the budget
# shrinks to a few thousand frames, which only checks that everything runs.

# %%
import json
import os

import matplotlib.pyplot as plt
import torch
from tensordict.nn import TensorDictSequential
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data import LazyTensorStorage, TensorDictReplayBuffer
from torchrl_lite.envs import GymEnv, RewardSum, TransformedEnv, set_exploration_type
from torchrl_lite.envs.utils import ExplorationType
from torchrl_lite.modules import MLP, EGreedyModule, QValueActor
from torchrl_lite.objectives import DQNLoss, HardUpdate

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
MAX_FRAMES = 3_072 if SMOKE else 150_000  # stop earlier once solved
TARGET = 475.0
SEED = 0

# %% [markdown]
# ## The environment and the Q-network
#
# Eight copies of CartPole step together through gymnasium's vector API (`num_envs=8`,
# batch size `[8]`). `RewardSum` adds each episode's return under `"episode_reward"`, so
# finished episodes report it where `("next", "done")` is set. The Q-network maps the
# 4 observation numbers to one value per action; `QValueActor` wraps it so it writes
# `"action_value"` and the greedy (one-hot) `"action"`.

# %%
torch.manual_seed(SEED)
env = TransformedEnv(GymEnv("CartPole-v1", num_envs=8), RewardSum())
env.set_seed(SEED)
n_actions = env.action_spec.shape[-1]
qnet = MLP(in_features=4, out_features=n_actions, num_cells=[256, 256], activation_class=nn.ReLU)
actor = QValueActor(qnet, in_keys=["observation"], spec=env.action_spec)
print(actor(env.reset()))

# %% [markdown]
# ## Exploration, collector, buffer, loss
#
# The collector acts with the greedy actor followed by `EGreedyModule`, which swaps the
# action for a random one with probability epsilon (1.0 annealed to 0.01 over 16k
# frames); `actor` itself stays greedy for evaluation. The first 1024 frames are random.
# Every batch of 256 frames goes into the buffer, then 64 gradient steps each sample 128
# transitions. `DQNLoss` with `double_dqn=True` picks the next action with the online
# network and values it with the target network; `HardUpdate` copies the online weights
# into the target every 64 gradient steps.

# %%
explore = EGreedyModule(env.action_spec, eps_init=1.0, eps_end=0.01, annealing_num_steps=16_000)
collector = SyncDataCollector(
    env,
    TensorDictSequential(actor, explore),
    frames_per_batch=256,
    total_frames=MAX_FRAMES,
    init_random_frames=1024,
)
buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100_000), batch_size=128)
loss_fn = DQNLoss(actor, loss_function="smooth_l1", delay_value=True, double_dqn=True, gamma=0.99)
target_update = HardUpdate(loss_fn, value_network_update_interval=64)
optim = torch.optim.Adam(loss_fn.parameters(), lr=5e-4)

# %% [markdown]
# ## Greedy evaluation
#
# A separate env (other seeds) plays whole episodes with the greedy actor under
# `ExplorationType.DETERMINISTIC`; the return is the sum of the rewards.

# %%
eval_env = GymEnv("CartPole-v1")


def evaluate(episodes: int = 10) -> float:
    returns = []
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        for episode in range(episodes):
            eval_env.set_seed(10_000 + episode)
            rollout = eval_env.rollout(500, actor)  # stops at the end of the episode
            returns.append(rollout["next", "reward"].sum().item())
    return sum(returns) / len(returns)


# %% [markdown]
# ## The loop
#
# Like supervised learning, with the data set growing as the policy plays. Training stops
# once the last 10 training episodes average 475 and a greedy evaluation confirms it.

# %%
episodes, curve, solved = [], [], None  # curve: (frames, mean of the last 10 returns)
frames = 0
for data in collector:  # [8, 32] TensorDict
    frames += data.numel()
    buffer.extend(data.reshape(-1))
    explore.step(data.numel())
    done = data["next", "done"].squeeze(-1)
    episodes += data["next", "episode_reward"][done].squeeze(-1).tolist()
    if len(episodes) >= 10:
        curve.append((frames, sum(episodes[-10:]) / 10))
    if frames <= 1024:
        continue  # random warm-up frames only fill the buffer
    for _ in range(64):
        loss = loss_fn(buffer.sample())["loss"]
        optim.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(loss_fn.parameters(), 10.0)
        optim.step()
        target_update.step()
    if curve and curve[-1][1] >= TARGET and evaluate() >= TARGET:
        solved = frames
        break
collector.shutdown()
print(f"{frames} frames, {len(episodes)} episodes, solved at: {solved}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
if curve:
    ax.plot(*zip(*curve), "o-", ms=3, label="mean of the last 10 training returns")
ax.axhline(TARGET, color="k", linestyle="--", label=f"target {TARGET:.0f}")
ax.set(xlabel="frames", ylabel="return", title="DQN on CartPole-v1")
ax.legend(loc="lower right")
plt.show()

# %% [markdown]
# ## The greedy policy at work
#
# `from_pixels=True` adds the rendered frame as `"pixels"` to every step (`pixels_only=False`
# keeps the state the policy reads). Eight frames spread over one episode:

# %%
film_env = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
film_env.set_seed(123)
with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
    film = film_env.rollout(500, actor)
pixels = film["pixels"]  # [T, H, W, 3] uint8
picks = torch.linspace(0, len(pixels) - 1, 8).long()
fig, axes = plt.subplots(1, 8, figsize=(16, 2.2))
for ax, t in zip(axes, picks.tolist()):
    ax.imshow(pixels[t].numpy())
    ax.set_title(f"step {t}")
    ax.axis("off")
plt.show()
film_env.close()

# %% [markdown]
# ## The claim
#
# Ten greedy episodes on seeds the training never saw average at least 475 (in the smoke
# run: the untrained policy still balances for a few steps).

# %%
mean_return = evaluate(10)
claim = 8.0 if SMOKE else TARGET
result = {
    "metric": "greedy_mean_return",
    "value": mean_return,
    "target": claim,
    "frames": frames,
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert mean_return >= claim, result
