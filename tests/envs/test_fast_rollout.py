"""The fast random-action rollout (envs/stepper/rollout.py) against the general loop.

Each env that offers a numpy stepper is rolled out twice from the same seeds: once
through the stepper, once with the stepper switched off (the general loop, one
TensorDict per step). Keys, their order, shapes, dtypes and values must be equal, and
so must the env's state afterwards (the next rollout).
"""

from __future__ import annotations

import functools

import pytest
import torch

from torchrl_lite.data.tensor_specs import Binary, Bounded, Categorical, MultiCategorical, OneHot
from torchrl_lite.envs import (
    Compose,
    DoubleToFloat,
    DTypeCastTransform,
    GymEnv,
    InitTracker,
    ObservationNorm,
    ParallelEnv,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SerialEnv,
    StepCounter,
    TransformedEnv,
)
from torchrl_lite.envs.stepper.rollout import _BULK_RAND


def _general(env):
    env._numpy_stepper = lambda: None  # the general loop
    return env


def _rollouts(make, **kwargs):
    """Two consecutive rollouts of a new env, seeded the same way each call."""
    env = make()
    torch.manual_seed(3)
    env.set_seed(3)
    first = env.rollout(**kwargs)
    second = env.rollout(**kwargs)
    env.close()
    return first, second


def _assert_same(fast, slow):
    assert list(fast.keys(True, True)) == list(slow.keys(True, True))
    assert fast.batch_size == slow.batch_size
    for key in slow.keys(True, True):
        a, b = fast.get(key), slow.get(key)
        assert a.dtype == b.dtype and a.shape == b.shape, key
        assert torch.equal(a, b), key


def five(max_steps=None):
    """The transforms of issue 16's benchmark (StepCounter may end episodes)."""
    return Compose(
        ObservationNorm(loc=0.3, scale=2.0, in_keys=["observation"]),
        RewardScaling(loc=0.1, scale=0.5),
        RewardSum(),
        StepCounter(max_steps),
        InitTracker(),
    )


def _transformed(make_base, transforms):
    return lambda: TransformedEnv(make_base(), transforms())


ENVS = {
    "cartpole": lambda: GymEnv("CartPole-v1"),
    "cartpole-categorical": lambda: GymEnv("CartPole-v1", categorical_action_encoding=True),
    "pendulum": lambda: GymEnv("Pendulum-v1"),
    "mountaincar-continuous": lambda: GymEnv("MountainCarContinuous-v0"),
    "acrobot": lambda: GymEnv("Acrobot-v1"),
    "cartpole-vector": lambda: GymEnv("CartPole-v1", num_envs=3),
    "pendulum-vector": lambda: GymEnv("Pendulum-v1", num_envs=2),
    "serial-cartpole": lambda: SerialEnv(3, functools.partial(GymEnv, "CartPole-v1")),
    "serial-pendulum": lambda: SerialEnv(2, functools.partial(GymEnv, "Pendulum-v1")),
    "parallel-cartpole": lambda: ParallelEnv(3, functools.partial(GymEnv, "CartPole-v1")),
    "parallel-cartpole-2procs": lambda: ParallelEnv(
        4, functools.partial(GymEnv, "CartPole-v1"), num_processes=2
    ),
    # TransformedEnv: the wrapped env's stepper plus the transforms' numpy forms
    "transformed-empty": _transformed(lambda: GymEnv("CartPole-v1"), Compose),
    "transformed-cartpole": _transformed(lambda: GymEnv("CartPole-v1"), five),
    "transformed-pendulum-max-steps": _transformed(
        lambda: GymEnv("Pendulum-v1"),
        lambda: Compose(five(37), RewardClipping(-1.0, 0.5), RewardSum(out_keys=["clipped"])),
    ),
    "transformed-cartpole-vector": _transformed(lambda: GymEnv("CartPole-v1", num_envs=3), five),
    "transformed-serial-max-steps": _transformed(
        lambda: SerialEnv(3, functools.partial(GymEnv, "CartPole-v1")), lambda: five(15)
    ),
    "transformed-parallel-cartpole": _transformed(
        lambda: ParallelEnv(2, functools.partial(GymEnv, "CartPole-v1")), five
    ),
    "transformed-twice": lambda: TransformedEnv(
        TransformedEnv(GymEnv("CartPole-v1"), RewardSum()), Compose(StepCounter(), InitTracker())
    ),
}


@pytest.mark.parametrize("name", sorted(ENVS))
@pytest.mark.parametrize(
    "breaks",
    [
        {"break_when_any_done": False},
        {"break_when_any_done": True},
        {"break_when_any_done": False, "break_when_all_done": True},
    ],
    ids=["no-break", "any-done", "all-done"],
)
def test_fast_rollout_equals_the_general_loop(name, breaks):
    make = ENVS[name]
    env = make()
    assert env._numpy_stepper() is not None, "this env should offer a stepper"
    env.close()
    fast = _rollouts(make, max_steps=250, **breaks)
    slow = _rollouts(lambda: _general(make()), max_steps=250, **breaks)
    for a, b in zip(fast, slow):
        _assert_same(a, b)
    if not any(breaks.values()) and name.split("-")[-1] not in ("acrobot", "continuous"):
        assert bool(fast[0]["next", "done"].any()), "the rollout should cross a reset"


def test_fast_rollout_keeps_the_env_usable_step_by_step():
    def run(env):
        torch.manual_seed(0)
        env.set_seed(0)
        env.rollout(40, break_when_any_done=False)
        td, steps = env.reset(), []
        for _ in range(30):
            td, root = env.step_and_maybe_reset(env.rand_action(td))
            steps.append(td)
            td = root
        return torch.stack(steps)

    _assert_same(run(GymEnv("CartPole-v1")), run(_general(GymEnv("CartPole-v1"))))


@pytest.mark.parametrize(
    "spec",
    [
        Bounded(-2.0, 2.0, shape=(1,)),
        Bounded(0, 5, shape=(2,), dtype=torch.int64),
        Categorical(3),
        OneHot(2),
        Binary(4),
        MultiCategorical([2, 3]),
    ],
)
def test_bulk_random_actions_equal_one_draw_per_step(spec):
    assert isinstance(spec, _BULK_RAND)
    torch.manual_seed(0)
    per_step = torch.stack([spec.rand() for _ in range(50)])
    torch.manual_seed(0)
    assert torch.equal(spec.rand((50,)), per_step)


class _Counter(StepCounter):  # a subclass may change what a step does
    pass


@pytest.mark.parametrize(
    "transforms",
    [
        lambda: _Counter(),  # no numpy form for a subclass
        # a cast that renames: no numpy form (one in place has: see the MuJoCo test below)
        lambda: DTypeCastTransform(torch.float32, torch.float64, ["observation"], ["obs64"]),
        lambda: Compose(StepCounter(), ObservationNorm(in_keys=["observation"])),  # no stats
        # a per-step form (StepCounter ending episodes) after a deferred one writing its count
        lambda: Compose(RewardSum(out_keys=["step_count"]), StepCounter(5)),
    ],
    ids=["subclass", "no-form", "uninitialized-norm", "per-step-after-deferred"],
)
def test_transforms_without_a_numpy_form_take_the_general_loop(transforms):
    transformed = TransformedEnv(GymEnv("CartPole-v1"), transforms())
    assert transformed._numpy_stepper() is None


@pytest.mark.usefixtures("mujoco_log_in_tmp")
@pytest.mark.parametrize("num_envs", [None, 2], ids=["single", "vector"])
def test_double_to_float_casts_in_the_buffers(num_envs):
    # MuJoCo observes float64; the recipes cast it with DoubleToFloat
    kwargs = {} if num_envs is None else {"num_envs": num_envs}

    def make():
        return TransformedEnv(GymEnv("Hopper-v5", **kwargs), Compose(DoubleToFloat(), RewardSum()))

    env = make()
    assert env._numpy_stepper() is not None
    env.close()
    fast = _rollouts(make, max_steps=120, break_when_any_done=False)
    slow = _rollouts(lambda: _general(make()), max_steps=120, break_when_any_done=False)
    for a, b in zip(fast, slow):
        _assert_same(a, b)
    assert fast[0]["observation"].dtype == fast[0]["next", "observation"].dtype == torch.float32
    assert bool(fast[0]["next", "done"].any()), "the rollout should cross a reset"
    # a form before the cast would work on the float64 values: the general loop then
    norm_first = Compose(
        ObservationNorm(loc=0.3, scale=2.0, in_keys=["observation"]), DoubleToFloat()
    )
    assert TransformedEnv(GymEnv("Hopper-v5"), norm_first)._numpy_stepper() is None


def test_an_uninitialized_norm_raises_its_own_error():
    env = TransformedEnv(GymEnv("CartPole-v1"), ObservationNorm(in_keys=["observation"]))
    with pytest.raises(RuntimeError, match="ObservationNorm has no loc/scale yet"):
        env.rollout(5)


def test_envs_without_a_stepper_take_the_general_loop():
    transformed = TransformedEnv(GymEnv("CartPole-v1"), _Counter())
    out = transformed.rollout(20, break_when_any_done=False)
    assert out["next", "step_count"].shape == (20, 1)
    pixels = GymEnv("CartPole-v1", from_pixels=True, pixels_only=False)
    assert pixels._numpy_stepper() is None
    pixels.close()


def test_a_policy_or_callback_takes_the_general_loop():
    env = GymEnv("Pendulum-v1")
    calls = []
    env._numpy_stepper = lambda: calls.append(1)
    env.rollout(5, policy=lambda td: env.rand_action(td))
    env.rollout(5, callback=lambda e, td: None)
    assert calls == []
    env.rollout(5)
    assert calls == [1]
