# %% [markdown]
# # Environments, transforms and batched envs
#
# An env in torchrl_lite takes and returns TensorDicts: `reset()` gives the first
# observation, `step(td)` reads `"action"` and writes the results under `"next"`,
# `step_mdp` moves `"next"` to the root for the following step, and `rollout` does all of
# it in a loop. This notebook walks through that contract with gymnasium envs, stacks
# transforms on top (step counting, episode returns, observation normalisation, frame
# stacking, image resizing), then runs several copies serially and in worker processes,
# including partial resets. The picture: a filmstrip of rendered CartPole frames, raw
# and resized. The claim: a `ParallelEnv` (worker processes) returns exactly what a
# `SerialEnv` (one process) returns for the same seeds.

# %%
import json
import os

import matplotlib.pyplot as plt
import torch
from tensordict import TensorDict

from torchrl_lite.envs import (
    CatFrames,
    GymEnv,
    ObservationNorm,
    ParallelEnv,
    Resize,
    RewardSum,
    SerialEnv,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
    check_env_specs,
    step_mdp,
)

SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
STEPS = 50 if SMOKE else 500  # steps of the Serial/Parallel comparison
WORKERS = 2 if SMOKE else 4
torch.manual_seed(0)

# %% [markdown]
# ## One env, by hand
#
# `GymEnv` wraps a gymnasium id. Its specs say what it reads and writes; `reset`,
# `step` and `step_mdp` are the three calls of every loop.

# %%
env = GymEnv("Pendulum-v1")
env.set_seed(0)
print(env.observation_spec, env.action_spec, sep="\n")
td = env.reset()
td["action"] = env.action_spec.rand()
td = env.step(td)  # writes ("next", "observation"), ("next", "reward"), done flags
print(td)
td = step_mdp(td)  # the next step starts from ("next", ...)
print(td.keys())

# %% [markdown]
# `rollout(T)` runs that loop (random actions without a policy) into one preallocated
# `[T]` TensorDict, and `check_env_specs` runs a short rollout and checks every entry
# against the specs (it raises, naming the key, when one does not match).

# %%
rollout = env.rollout(10)
print(rollout.batch_size, rollout["next", "reward"].squeeze(-1))
check_env_specs(env)

# %% [markdown]
# ## Transforms
#
# `TransformedEnv(env, transforms)` applies a flat, editable list of transforms to every
# reset and step, and updates the specs to match:
#
# - `StepCounter(max_steps)`: `"step_count"`, truncating episodes at `max_steps`;
# - `RewardSum()`: the running return in `"episode_reward"`;
# - `ObservationNorm`: `(obs - loc) / scale`, with statistics from random rollouts
#   (`init_stats`);
# - `CatFrames(N, dim)`: the last `N` observations concatenated (velocities from
#   positions).

# %%
tenv = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=20))
tenv.append_transform(RewardSum())
tenv.append_transform(ObservationNorm(in_keys=["observation"], standard_normal=True))
tenv.transform[-1].init_stats(num_iter=500)
tenv.append_transform(CatFrames(N=4, dim=-1, in_keys=["observation"]))
tenv.set_seed(0)
print(tenv.transform)
out = tenv.rollout(100)  # stops at the truncation after 20 steps
print(out.batch_size, out["next", "observation"].shape, out["next", "step_count"][-1].item())
print("return:", out["next", "episode_reward"][-1].item())
check_env_specs(tenv)

# %% [markdown]
# Images work the same way: `from_pixels=True` adds the rendered frame as uint8
# `"pixels"` `[H, W, 3]`; `ToTensorImage` makes it a float `[3, H, W]` in [0, 1] and
# `Resize` shrinks it (here to 64x64).

# %%
penv = TransformedEnv(
    GymEnv("CartPole-v1", from_pixels=True, pixels_only=False),
    ToTensorImage(in_keys=["pixels"], out_keys=["small"]),
)
penv.append_transform(Resize(64, 64, interpolation="area", in_keys=["small"]))
penv.set_seed(0)
film = penv.rollout(40)
print(film["pixels"].shape, film["small"].shape)
picks = torch.linspace(0, len(film) - 1, 6).long().tolist()
fig, axes = plt.subplots(2, 6, figsize=(14, 4))
for col, t in enumerate(picks):
    axes[0, col].imshow(film["pixels"][t].numpy())
    axes[0, col].set_title(f"step {t}")
    axes[1, col].imshow(film["small"][t].permute(1, 2, 0).numpy())
for ax in axes.flat:
    ax.axis("off")
axes[0, 0].text(-40, 200, "raw", rotation=90)
axes[1, 0].text(-12, 40, "64x64", rotation=90)
plt.show()
penv.close()

# %% [markdown]
# ## Batched envs and partial resets
#
# `SerialEnv(n, make_env)` steps `n` copies in this process; `ParallelEnv(n, make_env)`
# runs each copy in a worker process, exchanging data through shared memory. Both have
# batch size `[n]` and the same methods. A `"_reset"` mask (`[n, 1]`, bool) in the
# TensorDict given to `reset` resets only the chosen copies, which is what collectors do
# when some episodes end.


# %%
def make_env():
    return TransformedEnv(GymEnv("Pendulum-v1"), StepCounter())


penv = ParallelEnv(WORKERS, make_env)
penv.set_seed(0)
td = penv.reset()
for _ in range(5):
    td["action"] = penv.action_spec.rand()
    td = step_mdp(penv.step(td))
print("step counts:", td["step_count"].squeeze(-1).tolist())
mask = torch.zeros(WORKERS, 1, dtype=torch.bool)
mask[0] = True
td = penv.reset(TensorDict({"_reset": mask}, batch_size=[WORKERS]))
print("after resetting copy 0:", td["step_count"].squeeze(-1).tolist())


# %% [markdown]
# ## The claim: worker processes change nothing
#
# The same seeds and a deterministic policy (a PD-like torque from the observation)
# give identical rollouts whether the copies run in worker processes or in this one.


# %%
def policy(td):
    cos, sin, speed = td["observation"].unbind(-1)
    torque = (-2.0 * sin - 0.5 * speed).clamp(-2.0, 2.0)  # [n]
    return td.set("action", torque.unsqueeze(-1))


senv = SerialEnv(WORKERS, make_env)
rollouts = []
for batched in (penv, senv):
    batched.set_seed(0)
    rollouts.append(batched.rollout(STEPS, policy, break_when_any_done=False))
par, ser = rollouts
print(par.batch_size, ser.batch_size)
diff = max(
    (par[key].double() - ser[key].double()).abs().max().item()
    for key in par.keys(include_nested=True, leaves_only=True)
)
penv.close()
senv.close()
result = {
    "metric": "max_abs_diff_parallel_vs_serial",
    "value": diff,
    "target": 0.0,
    "steps": STEPS,
    "workers": WORKERS,
    "smoke": SMOKE,
}
print("RESULT", json.dumps(result))
assert diff == 0.0 and par.batch_size == ser.batch_size, result
