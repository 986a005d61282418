"""The numpy stepper as a public hook: the ``NumpyStepper``/``NumpyForm`` protocols, a
user env's own stepper and a user transform's own numpy form, each rolled out against the
general loop (as ``test_fast_rollout.py`` does for the built-in steppers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from tests.envs.test_fast_rollout import ENVS, _assert_same, _general, _rollouts
from torchrl_lite.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl_lite.envs import (
    GymEnv,
    PendulumEnv,
    SerialEnv,
    StepCounter,
    Transform,
    TransformedEnv,
)
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.stepper import (
    NumpyForm,
    NumpyGroup,
    NumpyStepper,
    keeps_hooks,
    numpy_form,
)
from torchrl_lite.envs.stepper.forms import Elementwise


@pytest.mark.parametrize("name", sorted(ENVS))
def test_every_built_in_stepper_follows_the_protocol(name):
    env = ENVS[name]()
    stepper = env._numpy_stepper()
    assert isinstance(stepper, NumpyStepper)
    assert len(stepper.step_layout) == len(stepper.step_keys)
    assert len(stepper.reset_layout) == len(stepper.reset_keys)
    env.close()


def test_a_serial_env_of_gym_copies_steps_through_a_group():
    env = SerialEnv(2, lambda: GymEnv("CartPole-v1"))
    env.reset()
    assert isinstance(env._numpy_stepper(), NumpyGroup)
    env.close()
    other = SerialEnv(2, PendulumEnv)  # EnvBase._batch_group: no group, the general loop
    other.reset()
    assert other._numpy_stepper() is None
    other.close()


class _Walk(EnvBase):
    """A 1-d walk: ``x += action``, reward ``-|x|``, terminated once ``|x| >= 2``."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.action_spec = Bounded(-1.0, 1.0, (1,))
        self.reward_spec = Unbounded((1,))
        self.x = np.zeros(1, np.float32)

    def _reset(self, tensordict):
        self.x = np.zeros(1, np.float32)
        return TensorDict({"observation": torch.from_numpy(self.x.copy())}, [])

    def _step(self, tensordict):
        self.x = self.x + tensordict["action"].numpy()
        end = torch.tensor([bool(abs(self.x[0]) >= 2)])
        return TensorDict(
            {
                "observation": torch.from_numpy(self.x.copy()),
                "reward": torch.from_numpy(-np.abs(self.x)),
                "done": end,
                "terminated": end.clone(),
                "truncated": torch.zeros(1, dtype=torch.bool),
            },
            [],
        )

    def _set_seed(self, seed: int) -> None:
        pass

    def _numpy_stepper(self):
        self.stepper_calls = getattr(self, "stepper_calls", 0) + 1
        return _WalkStepper(self)


class _WalkStepper:
    """``_Walk`` at the numpy level: the same arithmetic, written into the buffers."""

    step_keys = ["observation", "reward", "done", "terminated", "truncated"]
    reset_keys = ["observation", "done", "terminated", "truncated"]
    step_layout = [((1, 1), np.float32), ((1, 1), np.float32)] + [((1, 1), np.bool_)] * 3
    reset_layout = [((1, 1), np.float32)] + [((1, 1), np.bool_)] * 3

    def __init__(self, env):
        self.env = env

    def bind(self, next_bufs, root_bufs):
        self.obs, self.reward, self.done, self.term, self.trunc = next_bufs
        self.root_obs = root_bufs[0]

    def prepare(self, actions):
        return actions.numpy()  # [T, 1, 1]

    def step_at(self, action_t, t):
        env = self.env
        env.x = env.x + action_t[0]
        self.obs[t, 0] = env.x
        self.reward[t, 0] = -np.abs(env.x)
        self.done[t, 0] = self.term[t, 0] = abs(env.x[0]) >= 2
        self.trunc[t, 0] = False
        return bool(self.done[t, 0, 0])

    def reset_at(self, chosen, t):
        self.env.x = np.zeros(1, np.float32)
        self.root_obs[t, 0] = self.env.x


@pytest.mark.parametrize("breaks", [False, True])
def test_a_user_env_offers_its_own_stepper(breaks):
    env = _Walk()
    assert isinstance(env._numpy_stepper(), NumpyStepper)
    fast = _rollouts(_Walk, max_steps=60, break_when_any_done=breaks)
    slow = _rollouts(lambda: _general(_Walk()), max_steps=60, break_when_any_done=breaks)
    for a, b in zip(fast, slow):
        _assert_same(a, b)
    if not breaks:
        assert bool(fast[0]["next", "done"].any()), "the rollout should cross a reset"


def test_the_rollout_uses_a_user_env_stepper():
    env = _Walk()
    env.rollout(5)
    assert env.stepper_calls == 1


class _Double(Transform):
    """A user transform with its own numpy form."""

    def _apply_transform(self, x):
        return x * 2

    def _numpy_form(self):
        return Elementwise(self)


class _KeptCounter(StepCounter):
    """A subclass that keeps its parent's numpy form by naming it."""

    _numpy_form = StepCounter._numpy_form


class _PlainCounter(StepCounter):
    pass


@pytest.mark.parametrize(
    "transform",
    [lambda: _Double(in_keys=["reward"], out_keys=["double"]), lambda: _KeptCounter(7)],
    ids=["user-form", "subclass-names-the-form"],
)
def test_a_user_transform_offers_its_own_form(transform):
    def make():
        return TransformedEnv(GymEnv("CartPole-v1"), transform())

    env = make()
    assert isinstance(numpy_form(env.transform[0]), NumpyForm)
    assert env._numpy_stepper() is not None
    env.close()
    fast = _rollouts(make, max_steps=80, break_when_any_done=False)
    slow = _rollouts(lambda: _general(make()), max_steps=80, break_when_any_done=False)
    for a, b in zip(fast, slow):
        _assert_same(a, b)


def test_forms_are_not_inherited():
    assert numpy_form(StepCounter()) is not None
    assert numpy_form(_PlainCounter()) is None
    assert numpy_form(_KeptCounter()) is not None


class _ShapedEnv(TransformedEnv):
    """A TransformedEnv subclass whose ``_step`` changes the reward."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out.set("reward", out.get("reward") + 1)
        return out


def test_an_env_subclass_that_overrides_a_step_hook_takes_the_general_loop():
    env = _ShapedEnv(GymEnv("CartPole-v1"), StepCounter())
    assert not keeps_hooks(env, TransformedEnv, ("_step", "_reset"))
    assert env._numpy_stepper() is None
    rewards = env.rollout(5, break_when_any_done=False)["next", "reward"]
    assert torch.equal(rewards, torch.full((5, 1), 2.0))
    assert keeps_hooks(TransformedEnv(GymEnv("CartPole-v1")), TransformedEnv, ("_step",))
