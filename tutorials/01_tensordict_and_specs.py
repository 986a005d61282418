# %% [markdown]
# # TensorDict and specs
#
# Every component of torchrl_lite reads and writes named entries of one `TensorDict`,
# and every env describes those entries with *specs*: shape, dtype and the values
# allowed. This notebook answers two questions: how does a TensorDict hold a batch of
# nested entries, and what can a spec do with a value (draw one, check one, fix one)?
# The picture: samples of a 2-D `Bounded` spec and of a `Categorical`, with the bounds.

# %%
import json
import os

import matplotlib.pyplot as plt
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded, Categorical, Composite, OneHot, Unbounded

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
SAMPLES = 2_000 if SMOKE else 20_000  # draws per spec
torch.manual_seed(0)

# %% [markdown]
# ## A TensorDict: a dict of tensors with shared batch dims
#
# `batch_size` gives the leading dims every entry shares; the rest of each entry's shape
# is its own. Nested keys are tuples: `("next", "reward")` lives in a sub-TensorDict
# `"next"`, which is how envs store the result of a step.

# %%
td = TensorDict(
    {
        "observation": torch.randn(4, 3),
        "action": torch.zeros(4, 1),
        "next": {"observation": torch.randn(4, 3), "reward": torch.ones(4, 1)},
    },
    batch_size=[4],
)
print(td)
print(td["next", "reward"].shape, td.keys(include_nested=True, leaves_only=True))

# %% [markdown]
# Indexing and reshaping act on the batch dims of all entries at once; `torch.stack`
# adds a batch dim (e.g. time), and a rollout of `T` steps of `B` envs is exactly such a
# `[B, T]` TensorDict.

# %%
print(td[1:3].batch_size, td.reshape(2, 2)["observation"].shape)
steps = torch.stack([td, td.clone()], dim=1)  # [4, 2]: 4 envs, 2 time steps
print(steps.batch_size, steps["next", "reward"].shape)

# %% [markdown]
# ## Specs: what values an entry may take
#
# - `Unbounded(shape)`: any real value (observations);
# - `Bounded(low, high, shape)`: a box, with scalar or per-element bounds (torques);
# - `Categorical(n)`: an integer in `[0, n)`; `OneHot(n)`: the same as a one-hot vector;
# - `Composite(...)`: a nested mapping of specs with shared batch dims, mirroring a
#   TensorDict.
#
# Each spec draws values (`rand`), checks them (`is_in`: dtype, shape, range) and fixes
# them (`project`: the nearest valid value).

# %%
box = Bounded(low=torch.tensor([-2.0, 0.0]), high=torch.tensor([2.0, 1.0]), shape=(2,))
dice = Categorical(6)
spec = Composite(
    observation=Unbounded((3,)),
    action=box,
    choice=OneHot(4),
    shape=(),
)
spec["next", "reward"] = Unbounded((1,))  # nested keys create the sub-Composite
print(spec)

sample = spec.rand((5,))  # a TensorDict with batch size [5]
print(sample.batch_size, sample["action"][:2], spec.is_in(sample))

# %% [markdown]
# `is_in` rejects a wrong dtype, a wrong shape or a value out of range, and `project`
# brings values back into the spec: floats are clamped per element, integers rounded.

# %%
print(box.is_in(torch.tensor([0.5, 0.5])), box.is_in(torch.tensor([3.0, 0.5])))
print(box.is_in(torch.tensor([0.5, 0.5], dtype=torch.float64)), box.is_in(torch.zeros(3)))
print(box.project(torch.tensor([3.0, -1.0])), dice.project(torch.tensor([7, -2])))
try:
    box.assert_is_in(torch.tensor([3.0, 0.5]), key="action")
except ValueError as err:
    print(err)

# %% [markdown]
# ## Picture: samples of a spec
#
# `rand` draws uniformly inside the box (per-element bounds) and uniformly among the
# categories.

# %%
points = box.rand((SAMPLES,))  # [SAMPLES, 2]
rolls = dice.rand((SAMPLES,))  # [SAMPLES]
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
left.scatter(points[:, 0], points[:, 1], s=2, alpha=0.3)
left.add_patch(plt.Rectangle((-2, 0), 4, 1, fill=False, color="k", linestyle="--"))
left.set(xlim=(-2.5, 2.5), ylim=(-0.5, 1.5), title="Bounded([-2, 0], [2, 1]).rand()")
right.bar(range(6), torch.bincount(rolls, minlength=6).tolist())
right.set(xlabel="value", ylabel="count", title="Categorical(6).rand()")
plt.tight_layout()
plt.show()

# %% [markdown]
# ## The claim
#
# Every sample of the Composite is in the spec, and every projected value (far outside
# the box to start with) is too; the out-of-range values themselves are not.

# %%
checks = []
for _ in range(20):
    checks.append(spec.is_in(spec.rand((SAMPLES // 20,))))
wild = 10 * torch.randn(SAMPLES, 2)
checks += [box.is_in(box.project(v)) for v in wild[:200]]
checks.append(box.is_in(box.project(wild)))
outside = [not box.is_in(v) for v in wild[:200] if (v.abs() > 2).any()]
fraction = sum(checks) / len(checks)
result = {
    "metric": "fraction_in_spec",
    "value": fraction,
    "target": 1.0,
    "outside_rejected": sum(outside) / len(outside),
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert fraction == 1.0 and result["outside_rejected"] == 1.0, result
