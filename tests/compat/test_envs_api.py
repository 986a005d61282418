"""Seed-era TorchRL env usage (v0.4-v0.6), written as a user would, import changed only.

Each test follows TorchRL's documented behaviour of one name or keyword (issue 13, items
3, 7, 8 and 9) and checks it against an independent reference: raw gymnasium with the
same seed, a hand-counted quantity, or the canonical spelling of an alias.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.data.tensor_specs import Bounded, Categorical, Composite, Unbounded
from torchrl_lite.envs import (
    EnvBase,
    EnvCreator,
    GymEnv,
    ParallelEnv,
    PendulumEnv,
    SerialEnv,
    TransformedEnv,
    VecNorm,
    check_env_specs,
)
from torchrl_lite.envs.utils import ActionBoundsWarning, RandomPolicy


class DoneOnlyEnv(EnvBase):
    """A seed-era custom env: its ``_step`` writes ``"done"`` only (done at step 3)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.action_spec = Bounded(-1.0, 1.0, (1,))
        self.t = 0

    def _reset(self, tensordict):
        self.t = 0
        return TensorDict(observation=torch.zeros(1))

    def _step(self, tensordict):
        self.t += 1
        done = torch.tensor([self.t >= 3])
        return TensorDict(
            observation=torch.full((1,), float(self.t)), reward=torch.ones(1), done=done
        )

    def _set_seed(self, seed):
        pass

    def steps_plus(self, extra=0):
        """A custom method (batched envs dispatch it to each copy)."""
        return self.t + extra


# -- item 3: RandomPolicy, available_envs, attribute forwarding -------------------------
def test_random_policy_is_exported_where_torchrl_has_it():
    from torchrl_lite.collectors import RandomPolicy as from_collectors
    from torchrl_lite.modules import RandomPolicy as from_modules

    assert from_collectors is RandomPolicy and from_modules is RandomPolicy
    env = GymEnv("Pendulum-v1")
    torch.manual_seed(0)
    data = env.rollout(20, RandomPolicy(env.action_spec))
    assert env.action_spec.is_in(data["action"][0]) and data["action"].std() > 0
    # with a Composite, each of its entries is written
    td = RandomPolicy(env.full_action_spec)(TensorDict())
    assert td["action"].shape == (1,)


def test_available_envs_lists_registered_ids():
    assert GymEnv.available_envs == list(gym.registry.keys())
    assert "CartPole-v1" in GymEnv.available_envs


@pytest.mark.dm_control
def test_dm_control_available_envs():
    pytest.importorskip("dm_control")
    from dm_control import suite

    from torchrl_lite.envs import DMControlEnv

    domains = dict(DMControlEnv.available_envs)
    assert "swingup" in domains["cartpole"]
    assert sum(len(tasks) for tasks in domains.values()) == len(suite.ALL_TASKS)


def test_gym_env_forwards_attributes_to_the_gymnasium_env():
    env = GymEnv("CartPole-v1")
    raw = gym.make("CartPole-v1")
    assert env.spec.id == raw.spec.id == "CartPole-v1"
    assert type(env.unwrapped) is type(raw.unwrapped)
    assert env.unwrapped.gravity == raw.unwrapped.gravity
    with pytest.raises(AttributeError, match="no attribute 'not_there'"):
        env.not_there  # noqa: B018


# -- item 3: batched envs --------------------------------------------------------------
@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_batched_env_dispatches_attributes_and_methods_to_copies(cls):
    env = cls(2, lambda: GymEnv("CartPole-v1"))
    try:
        assert env.env_name == ["CartPole-v1", "CartPole-v1"]  # one value per copy
        assert [u.gravity for u in env.unwrapped] == [9.8, 9.8]  # read in the workers
        assert env.set_seed(3) == 5  # the batched env's own method: not dispatched
        with pytest.raises(AttributeError, match="not_there"):
            env.not_there  # noqa: B018
        assert not env.is_closed  # a failed lookup leaves the workers running
    finally:
        env.close()
    env = cls(2, DoneOnlyEnv)
    try:
        env.rollout(2, break_when_any_done=False)
        assert env.steps_plus(extra=10) == [12, 12]  # a method: called on every copy
    finally:
        env.close()


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_batched_env_restarts_after_close(cls):
    env = cls(2, lambda: GymEnv("Pendulum-v1"))
    env.set_seed(0)
    first = env.rollout(3)
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(first[:, 0])
    again = env.rollout(3)  # a rollout (or reset) starts new copies
    assert again.batch_size == (2, 3) and not env.is_closed
    env.close()


def test_serial_for_single_and_pin_memory_keywords():
    single = ParallelEnv(1, lambda: GymEnv("Pendulum-v1"), serial_for_single=True)
    assert type(single) is SerialEnv  # as TorchRL: no worker process for one env
    single.close()
    two = ParallelEnv(2, lambda: GymEnv("Pendulum-v1"), serial_for_single=True)
    assert type(two) is ParallelEnv
    two.close()
    # pin_memory: the same data (pinned when CUDA is present)
    outs = []
    for pin in (False, True):
        env = SerialEnv(2, lambda: GymEnv("Pendulum-v1"), pin_memory=pin)
        env.set_seed(1)
        torch.manual_seed(1)  # the random actions
        outs.append(env.rollout(4)["next", "observation"])
        assert env.pin_memory == (pin and torch.cuda.is_available())
        env.close()
    torch.testing.assert_close(outs[0], outs[1])


def test_env_creator_shares_vecnorm_statistics_across_workers():
    make = EnvCreator(lambda: TransformedEnv(GymEnv("Pendulum-v1"), VecNorm(decay=1.0)))
    stats = make.state_dict()["_extra_state"]["td"]
    assert stats.is_shared() and float(stats["observation_count"]) == 0
    # fork named: the default turns to spawn once an OpenGL driver has started in this
    # process (a rendering test run before this one), and spawned workers get copies
    env = ParallelEnv(2, make, mp_start_method="fork")
    env.rollout(10, break_when_any_done=False)
    env.close()
    # 2 workers x (1 reset + 10 steps) observations, counted in the parent's tensors
    assert float(stats["observation_count"]) == 22
    # each new env uses the same statistics; load_state_dict writes into them
    local = make()
    assert local.transform[0]._td is stats
    make.load_state_dict({"_extra_state": stats.clone().zero_()})
    assert float(stats["observation_count"]) == 0
    with pytest.raises(KeyError, match="unknown entries"):
        make.load_state_dict({"transforms.9._extra_state": stats})


def test_heterogeneous_batched_env_gives_lazy_stacks():
    # multi-task, as TorchRL's docs show it: a list of factories of different envs
    makers = [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("MountainCarContinuous-v0")]
    env = ParallelEnv(2, makers)
    check_env_specs(env)
    td = env.rollout(4, break_when_any_done=False)
    assert isinstance(td, LazyStackedTensorDict) and td.batch_size == (2, 4)
    assert td[0]["observation"].shape == (4, 3) and td[1]["observation"].shape == (4, 2)
    specs = [make().observation_spec for make in makers]
    assert env.observation_spec == torch.stack(specs, 0)
    assert env.observation_spec[1] == specs[1]
    env.close()
    # a discrete action and a continuous one cannot be stacked: it says so, at once
    with pytest.raises(TypeError, match="full_action_spec cannot be stacked.*'action'"):
        SerialEnv(2, [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("CartPole-v1")])


# -- item 3: the custom-env contract ---------------------------------------------------
def test_reset_updates_the_given_tensordict_in_place():
    env = GymEnv("Pendulum-v1")
    td = TensorDict({"my_entry": torch.ones(2)}, [])
    out = env.reset(td)
    assert out is td  # TorchRL returns the input, updated
    assert "observation" in td.keys() and torch.equal(td["my_entry"], torch.ones(2))
    batched = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    root = batched.reset()
    root.set("_reset", torch.tensor([[True], [False]]))
    kept = root["observation"][1].clone()
    assert batched.reset(root) is root and "_reset" not in root.keys()
    torch.testing.assert_close(root["observation"][1], kept)  # not reset: kept
    batched.close()


def test_step_writing_only_done_gets_terminated_and_truncated():
    env = DoneOnlyEnv()
    data = env.rollout(5)  # stops at the done step
    assert data["next", "done"].flatten().tolist() == [False, False, True]
    assert torch.equal(data["next", "terminated"], data["next", "done"])
    assert not data["next", "truncated"].any()
    check_env_specs(DoneOnlyEnv())
    stepped = DoneOnlyEnv()
    out = stepped.step(stepped.rand_action(stepped.reset()))
    assert set(out["next"].keys()) >= {"done", "terminated", "truncated"}
    batched = SerialEnv(2, DoneOnlyEnv)  # the copies are stepped through their _step
    rollout = batched.rollout(4, break_when_any_done=False)
    assert rollout["next", "terminated"][:, 2].all()
    batched.close()


def test_action_spec_unbatched():
    env = SerialEnv(3, lambda: GymEnv("Pendulum-v1"))
    single = GymEnv("Pendulum-v1")
    assert env.action_spec.shape == (3, 1)
    assert env.action_spec_unbatched == single.action_spec
    assert env.full_action_spec_unbatched["action"] == single.action_spec
    env.close()
    assert GymEnv("CartPole-v1").action_spec_unbatched == GymEnv("CartPole-v1").action_spec


# -- item 7: continuous actions beyond their bounds --------------------------------------
def test_float_overshoot_warns_once_and_is_passed_on():
    env = GymEnv("Pendulum-v1")
    raw = gym.make("Pendulum-v1")
    env.set_seed(0)
    raw.reset(seed=0)
    td = env.reset()
    with pytest.warns(ActionBoundsWarning, match=r"(?s)'action'.*max 3.*Bounded") as record:
        out = env.step(td.set("action", torch.tensor([3.0])))
    assert len(record) == 1
    obs, reward, *_ = raw.step(np.array([3.0], dtype=np.float32))  # gymnasium clips
    np.testing.assert_allclose(out["next", "observation"].numpy(), obs, rtol=1e-6)
    np.testing.assert_allclose(out["next", "reward"].numpy(), [reward], rtol=1e-6)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per env: no second warning
        env.step(td.set("action", torch.tensor([4.0])))


def test_overshoot_on_a_later_rollout_step_is_noticed():
    env = GymEnv("Pendulum-v1")
    calls = {"n": 0}

    def policy(td):
        calls["n"] += 1  # in bounds at the first step (the per-step check), then not
        return td.set("action", torch.tensor([0.5 if calls["n"] == 1 else 2.5]))

    with pytest.warns(ActionBoundsWarning, match="max 2.5"):
        env.rollout(5, policy)
    strict = GymEnv("Pendulum-v1", spec_check="strict")
    calls["n"] = 0
    with pytest.raises(ValueError, match='(?s)beyond.*spec_check="strict"'):
        strict.rollout(5, policy)


def test_wrong_shape_dtype_and_discrete_values_still_raise():
    env = GymEnv("Pendulum-v1")
    td = env.reset()
    with pytest.raises(ValueError, match="shape"):
        env.step(td.set("action", torch.zeros(2)))
    with pytest.raises(ValueError, match="dtype"):
        env.step(td.set("action", torch.zeros(1, dtype=torch.float64)))
    cartpole = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(cartpole.action_spec, Categorical)
    td = cartpole.reset()
    with pytest.raises(ValueError, match="outside"):
        cartpole.step(td.set("action", torch.tensor(5)))


# -- item 8: backpropagating through a rollout ---------------------------------------------
def test_rollout_keeps_gradients_when_the_first_step_has_none():
    """Repro: a differentiable policy in a differentiable env; the first step's
    observation (from reset) carries no gradient, the later ones do. The rollout used
    to fail with a misleading "changed shape" error."""
    env = PendulumEnv(seed=0)
    policy = TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    nn.init.zeros_(policy.module.weight)
    nn.init.constant_(policy.module.bias, 0.1)
    data = env.rollout(40, policy)  # > 32 steps: crosses the recorder's chunk
    assert not data["observation"][0].requires_grad or data["observation"].requires_grad
    assert data["next", "observation"].requires_grad
    data["next", "reward"].sum().backward()
    assert policy.module.bias.grad is not None and policy.module.bias.grad.abs() > 0


def test_a_copied_custom_env_steps_itself():
    import copy
    import pickle

    env = DoneOnlyEnv()
    env.rollout(2)  # its _step is now wrapped to fill the flags
    for clone in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        env.reset()
        data = clone.rollout(3)
        assert clone.t == 3 and env.t == 0  # the copy's own state moved, not the original's
        assert data["next", "terminated"][-1].item()
