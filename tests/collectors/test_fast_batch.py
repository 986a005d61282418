"""SyncDataCollector's numpy-stepper batches (collectors/_fast_batch.py) against the
general loop: the same batches (keys, order, values), the same carried root and
trajectory ids, batch after batch, for every env that offers a stepper."""

from __future__ import annotations

import functools

import pytest
import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from tests.envs.test_fast_rollout import _assert_same, five
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import GymEnv, ParallelEnv, SerialEnv, TransformedEnv
from torchrl_lite.modules import ProbabilisticActor, TanhNormal


def _mlp_policy():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1), nn.Tanh())
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def _stochastic_policy():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 2), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
        return_log_prob=True,
    )


def _random_policy(env):
    return lambda td: env.rand_action(td)


ENVS = {
    "pendulum": lambda: GymEnv("Pendulum-v1"),
    "pendulum-vector": lambda: GymEnv("Pendulum-v1", num_envs=2),
    "serial-pendulum": lambda: SerialEnv(2, functools.partial(GymEnv, "Pendulum-v1")),
    "parallel-pendulum": lambda: ParallelEnv(2, functools.partial(GymEnv, "Pendulum-v1")),
    "transformed-pendulum": lambda: TransformedEnv(GymEnv("Pendulum-v1"), five(70)),
    "transformed-serial-pendulum": lambda: TransformedEnv(
        SerialEnv(2, functools.partial(GymEnv, "Pendulum-v1")), five()
    ),
}
POLICIES = {"mlp": _mlp_policy, "stochastic": _stochastic_policy}


def _batches(make_env, make_policy, general: bool, **kwargs):
    env = make_env()
    if general:
        env._numpy_stepper = lambda: None
    env.set_seed(1)
    torch.manual_seed(1)
    collector = SyncDataCollector(env, make_policy(), frames_per_batch=240, **kwargs)
    out = []
    for i, batch in enumerate(collector):
        out.append((batch, collector._td.clone(), collector._traj_ids.clone()))
        if i == 3:
            break
    collector.shutdown()
    env.close()
    return out


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("name", sorted(ENVS))
def test_fast_batches_equal_the_general_loop(name, policy):
    fast = _batches(ENVS[name], POLICIES[policy], general=False)
    slow = _batches(ENVS[name], POLICIES[policy], general=True)
    for (a, a_root, a_ids), (b, b_root, b_ids) in zip(fast, slow):
        _assert_same(a, b)
        _assert_same(a_root, b_root)
        assert torch.equal(a_ids, b_ids)
    assert bool(fast[-1][0]["next", "done"].any()), "the batches should cross a reset"


@pytest.mark.usefixtures("mujoco_log_in_tmp")
def test_float64_observations_cast_by_double_to_float_take_the_stepper():
    from torchrl_lite.envs import Compose, DoubleToFloat, RewardSum

    def make_env():  # as the recipes build a MuJoCo env
        return TransformedEnv(GymEnv("Hopper-v5"), Compose(DoubleToFloat(), RewardSum()))

    def make_policy():
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(11, 16), nn.Tanh(), nn.Linear(16, 6), NormalParamExtractor())
        module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
        return ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                                  distribution_kwargs={"low": -1.0, "high": 1.0})  # fmt: skip

    env = make_env()
    assert env._numpy_stepper() is not None
    env.close()
    fast = _batches(make_env, make_policy, general=False)
    slow = _batches(make_env, make_policy, general=True)
    for (a, a_root, a_ids), (b, b_root, b_ids) in zip(fast, slow):
        _assert_same(a, b)
        _assert_same(a_root, b_root)
        assert torch.equal(a_ids, b_ids)
    assert bool(fast[-1][0]["next", "done"].any()), "the batches should cross a reset"


def test_a_plain_callable_policy_takes_the_stepper_too():
    env = GymEnv("CartPole-v1")
    fast = _batches(lambda: GymEnv("CartPole-v1"), lambda: _random_policy(env), general=False)
    slow = _batches(lambda: GymEnv("CartPole-v1"), lambda: _random_policy(env), general=True)
    for (a, _, a_ids), (b, _, b_ids) in zip(fast, slow):
        _assert_same(a, b)
        assert torch.equal(a_ids, b_ids)


def test_batches_that_need_the_general_loop_do_not_ask_for_a_stepper():
    env = GymEnv("Pendulum-v1")
    calls = []
    env._numpy_stepper = lambda: calls.append(1)
    collector = SyncDataCollector(env, _mlp_policy(), frames_per_batch=50, max_frames_per_traj=20)
    for i, batch in enumerate(collector):
        assert bool(batch["next", "truncated"].any())
        if i == 2:
            break
    assert calls == []
