# %% [markdown]
# # PPO on Pendulum, read like supervised learning
#
# The seed's "under 100 lines" script (`tutorials/ppo_pendulum.py`) trains PPO on
# Pendulum-v1. Read it as a supervised-learning loop whose data set is re-collected by
# the model itself:
#
# | supervised learning | here |
# |---|---|
# | a data set | `collector`: 1000 fresh steps of the current policy per batch |
# | labels | `adv_fn` (GAE) writes `"advantage"` and `"value_target"` into the batch |
# | a `DataLoader` | `buffer`: the batch, in shuffled minibatches of 50 |
# | the loss | `ClipPPOLoss`: clipped policy-gradient term + critic regression + entropy |
# | `optimizer.step()` | the same |
#
# Then the question the script's note answers: why do the seed's values (gamma 0.99,
# lr 2e-4) leave the reward flat for the first ~250k frames, and which three values fix
# it? The picture: both reward curves, and frames of the tuned policy swinging up.

# %%
import json
import os

import matplotlib.pyplot as plt
import torch
from tensordict.nn import TensorDictModule
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.data.replay_buffers import (
    LazyTensorStorage,
    SamplerWithoutReplacement,
    TensorDictReplayBuffer,
)
from torchrl_lite.envs import set_exploration_type
from torchrl_lite.envs.libs.gym import GymEnv
from torchrl_lite.envs.utils import ExplorationType
from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import ClipPPOLoss
from torchrl_lite.objectives.value import GAE

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
FRAMES = 1_000 if SMOKE else 50_000  # per run; two runs
EPOCHS = 2 if SMOKE else 10  # passes over each batch (the seed: 10)
SEED = 0
CLAIM = -16.3 if SMOKE else -4.0  # avg reward per step, last 5 batches (random: about -6.5)

# %% [markdown]
# ## The seed's loop, with its three values as arguments
#
# Everything below is the seed's script; only `gamma`, `lr` and the critic's loss type
# are parameters, and it records the average reward of each batch instead of printing
# it. The networks: three tanh layers of 128 units each for the actor (mean and scale of
# a Gaussian, squashed by `TanhNormal` into [-1, 1] as the seed writes it; Pendulum's
# torque bound is 2, so actions use half of it) and for the critic (one value).


# %%
def mlp(out: int) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(3, 128),
        nn.Tanh(),
        nn.Linear(128, 128),
        nn.Tanh(),
        nn.Linear(128, 128),
        nn.Tanh(),
        nn.Linear(128, out),
    )


def train(gamma: float, lr: float, loss_critic_type: str, frames: int, seed: int = SEED):
    """The seed's PPO loop; returns the actor and the average reward of each batch."""
    torch.manual_seed(seed)
    env = GymEnv("Pendulum-v1")
    env.set_seed(seed)
    model = TensorDictModule(
        nn.Sequential(mlp(2), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    critic = ValueOperator(mlp(1), in_keys=["observation"])
    actor = ProbabilisticActor(
        model,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True,
    )
    buffer = TensorDictReplayBuffer(
        storage=LazyTensorStorage(1000), sampler=SamplerWithoutReplacement(), batch_size=50
    )
    collector = SyncDataCollector(env, actor, frames_per_batch=1000, total_frames=frames)
    loss_fn = ClipPPOLoss(actor, critic, loss_critic_type=loss_critic_type)
    adv_fn = GAE(value_network=critic, average_gae=True, gamma=gamma, lmbda=0.95)
    optim = torch.optim.Adam(loss_fn.parameters(), lr=lr)

    rewards = []
    for data in collector:  # the data set: 1000 steps of the current policy, [1000]
        for _ in range(EPOCHS):  # 10 epochs over it
            adv_fn(data)  # the labels: "advantage" and "value_target"
            buffer.extend(data)
            for sample in buffer:  # 20 shuffled minibatches of 50
                loss_vals = loss_fn(sample)
                loss = sum(v for k, v in loss_vals.items() if k.startswith("loss"))
                loss.backward()
                optim.step()
                optim.zero_grad()
        rewards.append(data["next", "reward"].mean().item())
    collector.shutdown()
    return actor, rewards


# %% [markdown]
# ## Run 1: the seed's values
#
# gamma 0.99, lr 2e-4, a smooth-L1 critic loss (`ClipPPOLoss`'s default).

# %%
_, seed_rewards = train(gamma=0.99, lr=2e-4, loss_critic_type="smooth_l1", frames=FRAMES)
print([round(r, 2) for r in seed_rewards[-5:]])

# %% [markdown]
# ## Why this learns slowly
#
# Pendulum's reward per step lies in [-16.3, 0]; a random policy averages about -6.5.
# With gamma 0.99 the critic's targets (discounted returns over ~100 steps) lie around
# -500. Adam normalises the gradient's size, so at lr 2e-4 each update moves the critic's
# output by a roughly fixed small amount, whatever the error: it needs a few hundred
# batches (200 updates each) to reach the scale of the returns. Until then the
# advantages (target minus a far-off value) carry little more than the next ~20 rewards,
# and the policy gradient is mostly noise. Measured with the script (seeds 0 and 1): the
# average reward stays at -6 +- 0.7 up to about 250k frames, then rises to -2 to -3.
#
# Three values fix it:
#
# 1. **gamma 0.9**: returns over ~10 steps, targets around -50, a scale the critic
#    reaches in a few batches (Pendulum needs no longer horizon: the swing-up is short);
# 2. **lr 1e-3**: five times larger steps for the critic (and the actor);
# 3. **an L2 critic loss**: smooth-L1 weighs every sample whose error exceeds 1 alike,
#    L2 weighs samples by their error, so the minibatch's direction is set by the states
#    the critic is most wrong about. (Adam still normalises the step's overall size: the
#    script's note measured smooth-L1 and L2 moving the critic by the same amount per
#    batch, so of the three this one matters least.)

# %% [markdown]
# ## Run 2: the three fixes

# %%
actor, tuned_rewards = train(gamma=0.9, lr=1e-3, loss_critic_type="l2", frames=FRAMES)
print([round(r, 2) for r in tuned_rewards[-5:]])

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
batches = [1000 * (i + 1) for i in range(len(seed_rewards))]
ax.plot(batches, seed_rewards, "o-", ms=3, label="seed's values (gamma 0.99, lr 2e-4, smooth-L1)")
ax.plot(batches, tuned_rewards, "o-", ms=3, label="gamma 0.9, lr 1e-3, L2 critic")
ax.set(xlabel="frames", ylabel="average reward per step", title="PPO on Pendulum-v1")
ax.legend(loc="lower right", fontsize=8)
plt.show()

# %% [markdown]
# ## The swing-up
#
# The tuned actor, deterministic (the mean action), from a hanging start; eight frames
# spread over the first 100 steps.

# %%
film_env = GymEnv("Pendulum-v1", from_pixels=True, pixels_only=False)
film_env.set_seed(7)
with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
    film = film_env.rollout(100, actor)
picks = torch.linspace(0, 99, 8).long().tolist()
fig, axes = plt.subplots(1, 8, figsize=(16, 2.2))
for ax, t in zip(axes, picks):
    ax.imshow(film["pixels"][t].numpy())
    ax.set_title(f"step {t}")
    ax.axis("off")
plt.show()
film_env.close()

# %% [markdown]
# ## The claim
#
# With the three fixes, the last 5 batches average at least -4 per step (a random policy:
# about -6.5; the smoke run only checks the reward lies in Pendulum's range).

# %%
last = sum(tuned_rewards[-5:]) / len(tuned_rewards[-5:])
result = {
    "metric": "avg_reward_last_batches",
    "value": last,
    "target": CLAIM,
    "seed_values_last": sum(seed_rewards[-5:]) / len(seed_rewards[-5:]),
    "frames_per_run": FRAMES,
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert last >= CLAIM, result
