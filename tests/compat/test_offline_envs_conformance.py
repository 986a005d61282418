"""TorchRL's bandit env (``envs.libs.openml``) and profiling switch, as its scripts use them."""

import warnings

import pytest
import torch

from torchrl_lite.envs.libs.openml import OpenMLEnv
from torchrl_lite.envs.utils import check_env_specs


def test_openml_env_is_a_one_step_bandit_paying_the_right_class():
    features = torch.randn(50, 5)
    labels = torch.randint(3, (50,))
    env = OpenMLEnv.from_arrays(features, labels, batch_size=[8])
    check_env_specs(env)
    assert env.action_spec.space.n == 3
    td = env.reset()
    rows = [(features == row).all(-1).nonzero().item() for row in td["observation"]]
    assert td["y"].tolist() == labels[rows].tolist()  # the hidden class of each drawn row
    td["action"] = (td["y"] + torch.tensor([0, 1] * 4)) % 3  # half right, half wrong
    out = env.step(td)["next"]
    assert out["reward"].squeeze(-1).tolist() == [1.0, 0.0] * 4
    assert out["done"].all() and out["terminated"].all()


def test_openml_env_draws_the_same_rows_after_the_same_seed():
    env = OpenMLEnv.from_arrays(torch.arange(20.0).unsqueeze(-1), torch.arange(20) % 2, [6])
    env.set_seed(3)
    first = env.reset()["observation"]
    env.set_seed(3)
    assert torch.equal(first, env.reset()["observation"])


def test_openml_env_refuses_unknown_names_and_says_nothing_is_downloaded():
    with pytest.raises(ValueError, match="unknown dataset 'iris'; known: \\['adult_num'"):
        OpenMLEnv("iris", batch_size=[4])
    try:
        import sklearn  # noqa: F401
    except ImportError:
        with pytest.raises(
            ImportError, match="scikit-learn is not installed.*Nothing is downloaded"
        ):
            OpenMLEnv("adult_onehot", batch_size=[4])
    with pytest.raises(ValueError, match="same, non-zero number of rows"):
        OpenMLEnv.from_arrays(torch.zeros(3, 2), torch.zeros(4, dtype=torch.long))


def test_set_profiling_enabled_needs_the_variable_at_import(monkeypatch):
    from torchrl_lite import _utils

    monkeypatch.setattr(_utils, "_PROFILING_ALLOWED", False)
    monkeypatch.setattr(_utils, "_PROFILING_ENABLED", False)
    with pytest.warns(UserWarning, match="TORCHRL_LITE_PROFILING=1"):
        _utils.set_profiling_enabled(True)
    assert not _utils._PROFILING_ENABLED
    monkeypatch.setattr(_utils, "_PROFILING_ALLOWED", True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _utils.set_profiling_enabled(True)
    with torch.profiler.profile() as prof:
        with _utils.profiling_scope("h8_scope"):
            torch.ones(2).sum()
    assert any(e.name == "h8_scope" for e in prof.events())
    _utils.set_profiling_enabled(False)
    with torch.profiler.profile() as prof:
        with _utils.profiling_scope("h8_off"):
            torch.ones(2).sum()
    assert not any(e.name == "h8_off" for e in prof.events())


def test_td0_with_zero_discount_regresses_on_the_reward_alone():
    # TorchRL's bandit script: make_value_estimator(gamma=0.0) for one-step episodes
    from tensordict import TensorDict
    from tensordict.nn import TensorDictModule

    from torchrl_lite.objectives.value import TD0Estimator

    critic = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["state_value"])
    batch = TensorDict(
        observation=torch.randn(5, 3),
        next=TensorDict(observation=torch.randn(5, 3), reward=torch.randn(5, 1),
                        done=torch.zeros(5, 1, dtype=torch.bool),
                        terminated=torch.zeros(5, 1, dtype=torch.bool), batch_size=[5]),
        batch_size=[5],
    )  # fmt: skip
    target = TD0Estimator(gamma=0.0, value_network=critic).value_estimate(batch)
    torch.testing.assert_close(target, batch["next", "reward"])


def test_rollout_accepts_auto_cast_to_device_and_acts_the_same():
    # TorchRL's evaluation call in the offline scripts
    from tensordict.nn import TensorDictModule

    from torchrl_lite.envs import GymEnv

    env = GymEnv("Pendulum-v1")
    policy = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
    runs = []
    for cast in (False, True):
        env.set_seed(0)
        with torch.no_grad():
            runs.append(env.rollout(5, policy, auto_cast_to_device=cast))
    env.close()
    torch.testing.assert_close(runs[0]["next", "observation"], runs[1]["next", "observation"])


def test_env_apply_reaches_each_transform_once_and_numel_counts_sub_envs():
    # TorchRL's scripts: eval_env.apply(dump_video) finds the VideoRecorder transform
    from torchrl_lite.envs import (
        Compose,
        EnvCreator,
        GymEnv,
        ParallelEnv,
        RewardSum,
        StepCounter,
        TransformedEnv,
    )

    counter, summer = StepCounter(10), RewardSum()
    base = ParallelEnv(2, EnvCreator(lambda: GymEnv("Pendulum-v1")), serial_for_single=True)
    env = TransformedEnv(base, Compose(counter, summer))
    calls = []
    assert env.apply(calls.append) is env
    assert sum(c is counter for c in calls) == 1 and sum(c is summer for c in calls) == 1
    assert calls[-1] is env and sum(c is base for c in calls) == 1
    assert env.numel() == 2 and GymEnv("Pendulum-v1").numel() == 1
    env.close()


def test_transformed_batched_env_starts_again_after_close():
    # TorchRL's v0.4 offline scripts close eval_env after building the model, then evaluate
    from torchrl_lite.envs import EnvCreator, GymEnv, ParallelEnv, RewardSum, TransformedEnv

    env = TransformedEnv(
        ParallelEnv(1, EnvCreator(lambda: GymEnv("Pendulum-v1")), serial_for_single=True),
        RewardSum(),
    )
    env.close()
    assert env.rollout(3)["next", "episode_reward"].shape == (1, 3, 1)
    assert not env.is_closed
    env.close()
    single = TransformedEnv(GymEnv("Pendulum-v1"), RewardSum())
    single.close()
    with pytest.raises(RuntimeError, match="Cannot roll out TransformedEnv: the env is closed"):
        single.rollout(2)


def test_model_based_is_a_package_with_torchrls_dreamer_module_path():
    # TorchRL's dreamer_v3 script: from torchrl.envs.model_based.dreamer import DreamerEnv
    from torchrl_lite.envs import DreamerEnv as FromEnvs
    from torchrl_lite.envs.model_based import DreamerEnv
    from torchrl_lite.envs.model_based.dreamer import DreamerEnv as FromModule

    assert DreamerEnv is FromModule is FromEnvs
