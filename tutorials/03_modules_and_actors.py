# %% [markdown]
# # Modules and probabilistic actors
#
# A policy in torchrl_lite is an ordinary `nn.Module` wrapped so that it reads and
# writes named TensorDict entries. This notebook builds the pieces an RL algorithm needs
# (a plain `MLP`, `TensorDictModule` and its `Sequential`, a stochastic actor with a
# `TanhNormal` distribution, a critic, a Q-value actor) and shows how
# `set_exploration_type` switches the same actor between sampling and acting
# deterministically. The picture: histograms of the actions for one observation,
# random vs deterministic. The claim: deterministic actions do not vary at all.

# %%
import json
import os

import matplotlib.pyplot as plt
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn

from torchrl_lite.data import Bounded, OneHot
from torchrl_lite.envs import set_exploration_type
from torchrl_lite.envs.utils import ExplorationType
from torchrl_lite.modules import (
    MLP,
    AdditiveGaussianModule,
    EGreedyModule,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
DRAWS = 2_000 if SMOKE else 50_000  # actions drawn for the histograms
torch.manual_seed(0)

# %% [markdown]
# ## From `nn.Module` to a TensorDict module
#
# `MLP` is a plain stack of linear layers. `TensorDictModule(module, in_keys, out_keys)`
# calls it on the entries named by `in_keys` and writes its outputs under `out_keys`;
# `TensorDictSequential` chains such modules, each reading what the previous wrote.

# %%
net = MLP(in_features=3, out_features=4, num_cells=[32, 32], activation_class=nn.Tanh)
print(net)
features = TensorDictModule(net, in_keys=["observation"], out_keys=["features"])
head = TensorDictModule(nn.Linear(4, 1), in_keys=["features"], out_keys=["score"])
pipeline = TensorDictSequential(features, head)
td = TensorDict(observation=torch.randn(5, 3), batch_size=[5])
print(pipeline(td))
print("reads", pipeline.in_keys, "writes", pipeline.out_keys)

# %% [markdown]
# ## A stochastic actor: `ProbabilisticActor` + `TanhNormal`
#
# The network writes the parameters of a distribution (`NormalParamExtractor` splits its
# output into a mean `"loc"` and a positive `"scale"`); `ProbabilisticActor` builds the
# distribution from them and writes an `"action"` (and, with `return_log_prob=True`, its
# `"sample_log_prob"`, which PPO needs). `TanhNormal` squashes a Gaussian sample into the
# action bounds, here [-2, 2].

# %%
action_spec = Bounded(-2.0, 2.0, shape=(1,))
param_net = nn.Sequential(
    MLP(in_features=3, out_features=2, num_cells=[32, 32]), NormalParamExtractor()
)
actor = ProbabilisticActor(
    TensorDictModule(param_net, in_keys=["observation"], out_keys=["loc", "scale"]),
    in_keys=["loc", "scale"],
    distribution_class=TanhNormal,
    distribution_kwargs={"low": -2.0, "high": 2.0},
    return_log_prob=True,
    spec=action_spec,
)
print(actor(td.clone()))

# %% [markdown]
# ## Random or deterministic
#
# `set_exploration_type` is a context manager read by every probabilistic module:
# `RANDOM` samples (collection), `DETERMINISTIC` takes the distribution's deterministic
# value (for `TanhNormal`: the squashed mean; evaluation). The same observation (the actor
# is untrained, so its samples spread widely),
# repeated `DRAWS` times:

# %%
one_obs = TensorDict(
    observation=torch.tensor([[0.3, -0.8, 1.5]]).expand(DRAWS, 3), batch_size=[DRAWS]
)
with torch.no_grad():
    with set_exploration_type(ExplorationType.RANDOM):
        random_actions = actor(one_obs.clone())["action"].squeeze(-1)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        det_actions = actor(one_obs.clone())["action"].squeeze(-1)
print(f"random: mean {random_actions.mean():.3f}, std {random_actions.std():.3f}")
print(f"deterministic: mean {det_actions.mean():.3f}, std {det_actions.std():.3f}")

# %% [markdown]
# Exploration modules act the same way. `AdditiveGaussianModule` adds noise to a
# deterministic action (DDPG/TD3) and clips it into the spec, and does nothing under
# `DETERMINISTIC`.

# %%
noise = AdditiveGaussianModule(action_spec, sigma_init=0.5, sigma_end=0.5)
with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
    base = actor(one_obs.clone())
with torch.no_grad():
    noisy_actions = noise(base.clone())["action"].squeeze(-1)

fig, ax = plt.subplots(figsize=(7, 3.5))
bins = torch.linspace(-2, 2, 81).tolist()
ax.hist(random_actions.numpy(), bins=bins, alpha=0.6, label="RANDOM (TanhNormal sample)")
ax.hist(noisy_actions.numpy(), bins=bins, alpha=0.6, label="deterministic + Gaussian noise")
ax.axvline(det_actions[0].item(), color="k", linestyle="--", label="DETERMINISTIC")
ax.set(xlabel="action", ylabel="count", title="Actions for one observation")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## Critics and Q-value actors
#
# `ValueOperator` is a TensorDict module that writes `"state_value"` (reading the
# observation) or, reading the observation and the action, an action value
# (`"state_action_value"`). `QValueActor` is the discrete-action policy of DQN: its
# network writes one `"action_value"` per action and it writes the arg-max as a one-hot
# `"action"`; `EGreedyModule` after it replaces that action by a random one with
# probability epsilon, again only when exploring.

# %%
critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[32]), in_keys=["observation"])
print(critic(td.clone())["state_value"].shape)
qcritic = ValueOperator(
    MLP(in_features=3 + 1, out_features=1, num_cells=[32]), in_keys=["observation", "action"]
)
print(qcritic(actor(td.clone()))["state_action_value"].shape)

spec = OneHot(3)
qactor = QValueActor(MLP(in_features=3, out_features=3, num_cells=[32]), spec=spec)
explore = TensorDictSequential(qactor, EGreedyModule(spec, eps_init=0.5, eps_end=0.5))
with torch.no_grad():
    greedy = qactor(one_obs.clone())["action"].argmax(-1)
    explored = explore(one_obs.clone())["action"].argmax(-1)
print("greedy picks", torch.bincount(greedy, minlength=3).tolist())
print("eps=0.5 picks", torch.bincount(explored, minlength=3).tolist())

# %% [markdown]
# ## The claim
#
# Under `DETERMINISTIC` the actor's action for a fixed observation does not vary at all
# (standard deviation exactly 0), while sampled actions do.

# %%
det_std = det_actions.std().item()
result = {
    "metric": "deterministic_action_std",
    "value": det_std,
    "target": 0.0,
    "random_action_std": random_actions.std().item(),
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert det_std == 0.0 and result["random_action_std"] > 0.05, result
