"""Estimator modules (GAE, TD0/TD1/TD(lambda)) on Pendulum rollouts vs the functions."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite.envs import GymEnv
from torchrl_lite.objectives import ValueEstimators
from torchrl_lite.objectives.value import GAE, TD0Estimator, TD1Estimator, TDLambdaEstimator
from torchrl_lite.objectives.value.functional import (
    td0_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_return_estimate,
)

T = 230  # Pendulum truncates after 200 steps: one truncation inside the batch
GAMMA, LMBDA = 0.99, 0.95


def _rollout(seed: int, terminate_at: int) -> TensorDict:
    env = GymEnv("Pendulum-v1")
    env.set_seed(seed)
    td = env.rollout(T, break_when_any_done=False)
    env.close()
    # Pendulum never terminates: mark one step as terminated to exercise both kinds of end
    td["next", "terminated"][terminate_at] = True
    td["next", "done"][terminate_at] = True
    return td


@pytest.fixture(scope="module")
def rollouts():
    single = _rollout(0, terminate_at=50)  # [T]
    stacked = torch.stack([_rollout(1, terminate_at=30), _rollout(2, terminate_at=120)])  # [2, T]
    return {"T": single, "B,T": stacked}


@pytest.fixture(params=["T", "B,T"])
def data(request, rollouts):
    td = rollouts[request.param].clone()
    assert td["next", "truncated"].any() and td["next", "terminated"].any()
    return td


@pytest.fixture
def critic():
    return TensorDictModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["state_value"])


def _functional(name, critic, td):
    """(advantage, value_target) straight from the functions, values computed by hand."""
    with torch.no_grad():
        v = critic.module(td["observation"])
        nv = critic.module(td["next", "observation"])
    r, done, term = td["next", "reward"], td["next", "done"], td["next", "terminated"]
    if name == "GAE":
        return vec_generalized_advantage_estimate(GAMMA, LMBDA, v, nv, r, done, term)
    if name == "TD0":
        target = td0_return_estimate(GAMMA, nv, r, term)
    elif name == "TD1":
        target = vec_td1_return_estimate(GAMMA, nv, r, done, term)
    else:
        target = vec_td_lambda_return_estimate(GAMMA, LMBDA, nv, r, done, term)
    return target - v, target


def _make(name, critic, **kwargs):
    if name == "GAE":
        return GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, **kwargs)
    if name == "TD0":
        return TD0Estimator(gamma=GAMMA, value_network=critic, **kwargs)
    if name == "TD1":
        return TD1Estimator(gamma=GAMMA, value_network=critic, **kwargs)
    return TDLambdaEstimator(gamma=GAMMA, lmbda=LMBDA, value_network=critic, **kwargs)


NAMES = ["GAE", "TD0", "TD1", "TDLambda"]


@pytest.mark.parametrize("name", NAMES)
def test_estimator_matches_functional(name, critic, data):
    expected_adv, expected_target = _functional(name, critic, data)
    out = _make(name, critic)(data)
    assert out is data  # in place
    assert data["advantage"].shape == (*data.batch_size, 1)
    torch.testing.assert_close(data["advantage"], expected_adv)
    torch.testing.assert_close(data["value_target"], expected_target)
    # the values it computed are written too; the truncated step's "next" value comes from
    # the true final observation, not from the reset observation that follows
    with torch.no_grad():
        torch.testing.assert_close(
            data["next", "state_value"], critic.module(data["next", "observation"])
        )


@pytest.mark.parametrize("name", ["GAE", "TD1", "TDLambda"])  # TD0 has no loop
def test_estimator_loop_version_matches(name, critic, data):
    fast = _make(name, critic)(data.clone())
    slow = _make(name, critic, vectorized=False)(data.clone())
    torch.testing.assert_close(fast["advantage"], slow["advantage"], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fast["value_target"], slow["value_target"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_estimator_shifted_same_result_in_one_call(name, critic, data):
    calls = []
    critic.module.register_forward_hook(lambda *args: calls.append(1))
    plain = _make(name, critic)(data.clone())
    assert len(calls) == 2  # root and "next"
    calls.clear()
    shifted = _make(name, critic, shifted=True)(data.clone())
    assert len(calls) == 1
    for key in ["advantage", "value_target", "state_value", ("next", "state_value")]:
        torch.testing.assert_close(shifted[key], plain[key])


def test_gae_average_gae_standardises(critic, data):
    raw = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(data.clone())
    avg = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, average_gae=True)(data.clone())
    adv = avg["advantage"]
    assert adv.mean().abs() < 1e-5
    assert (adv.std() - 1).abs() < 1e-5
    expected = (raw["advantage"] - raw["advantage"].mean()) / raw["advantage"].std()
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(avg["value_target"], raw["value_target"])  # target unchanged


def test_seed_form(rollouts):
    """The seed's call: ``adv_fn = GAE(value_network=critic, ...); adv_fn(data)``."""
    from torchrl_lite.objectives.value import GAE as SeedGAE

    critic = TensorDictModule(
        nn.Sequential(nn.Linear(3, 128), nn.Tanh(), nn.Linear(128, 1)),
        in_keys=["observation"],
        out_keys=["state_value"],
    )
    data = rollouts["B,T"].clone()
    adv_fn = SeedGAE(value_network=critic, average_gae=True, gamma=0.99, lmbda=0.95)
    adv_fn(data)
    assert {"advantage", "value_target", "state_value"} <= set(data.keys())
    assert data["advantage"].shape == (2, T, 1)
    assert not data["advantage"].requires_grad


@pytest.mark.parametrize("name", NAMES)
def test_estimator_set_keys_honoured(name, data):
    critic = TensorDictModule(nn.Linear(3, 1), in_keys=["obs"], out_keys=["v"])
    renamed = TensorDict(
        {
            "obs": data["observation"],
            "next": {
                "obs": data["next", "observation"],
                "r": data["next", "reward"],
                "d": data["next", "done"],
                ("flags", "term"): data["next", "terminated"],
            },
        },
        data.batch_size,
    )
    est = _make(name, critic).set_keys(
        value="v",
        reward="r",
        done="d",
        terminated=("flags", "term"),
        advantage="adv",
        value_target="vt",
    )
    est(renamed)
    expected_adv, expected_target = _functional(name, critic, data)
    torch.testing.assert_close(renamed["adv"], expected_adv)
    torch.testing.assert_close(renamed["vt"], expected_target)
    assert "advantage" not in renamed.keys() and ("next", "v") in renamed.keys(True)
    assert ("next", "r") in est.in_keys and est.out_keys == ["adv", "vt"]


@pytest.mark.parametrize("name", NAMES)
def test_estimator_differentiable(name, critic, data):
    out = _make(name, critic)(data.clone())
    assert not out["advantage"].requires_grad and not out["value_target"].requires_grad
    out = _make(name, critic, differentiable=True)(data.clone())
    assert out["value_target"].requires_grad
    out["value_target"].sum().backward()
    assert critic.module.weight.grad is not None and critic.module.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("name", NAMES)
def test_estimator_without_value_network_reads_values(name, critic, data):
    expected_adv, expected_target = _functional(name, critic, data)
    with torch.no_grad():
        data["state_value"] = critic.module(data["observation"])
        data["next", "state_value"] = critic.module(data["next", "observation"])
    _make(name, None)(data)
    torch.testing.assert_close(data["advantage"], expected_adv)
    torch.testing.assert_close(data["value_target"], expected_target)


@pytest.mark.parametrize("name", NAMES)
def test_value_estimate_returns_target(name, critic, data):
    _, expected_target = _functional(name, critic, data)
    target = _make(name, critic).value_estimate(data)
    torch.testing.assert_close(target, expected_target)
    assert "advantage" not in data.keys()
    if name != "GAE":  # next_value overrides V(s')
        nv = torch.zeros_like(target)
        target = _make(name, critic).value_estimate(data, next_value=nv)
        expected = _functional(
            name, TensorDictModule(_Zero(), ["observation"], ["state_value"]), data
        )[1]
        torch.testing.assert_close(target, expected)


class _Zero(nn.Module):
    def forward(self, obs):
        return torch.zeros(*obs.shape[:-1], 1)


def test_per_step_gamma_tensor(critic, data):
    gamma = torch.full((*data.batch_size, 1), GAMMA)
    a = GAE(gamma=gamma, lmbda=LMBDA, value_network=critic)(data.clone())
    b = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(data.clone())
    torch.testing.assert_close(a["advantage"], b["advantage"])


def test_terminated_defaults_to_done(critic, data):
    without = data.exclude(("next", "terminated"))
    TDLambdaEstimator(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(without)
    as_term = data.clone()
    as_term["next", "terminated"] = as_term["next", "done"].clone()
    TDLambdaEstimator(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(as_term)
    torch.testing.assert_close(without["value_target"], as_term["value_target"])


def test_value_estimators_enum():
    assert ValueEstimators.GAE.estimator_class is GAE
    assert ValueEstimators.TD0.estimator_class is TD0Estimator
    assert ValueEstimators.TD1.estimator_class is TD1Estimator
    assert ValueEstimators.TDLambda.estimator_class is TDLambdaEstimator


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_estimator_missing_key_names_key_class_and_set_keys(name, critic, data):
    with pytest.raises(KeyError, match=rf"'next', 'reward'.*{name}.*set_keys\(reward="):
        _make(name, critic)(data.exclude(("next", "reward")))
    with pytest.raises(KeyError, match=r"'next', 'done'.*set_keys\(done="):
        _make(name, critic)(data.exclude(("next", "done")))
    with pytest.raises(KeyError, match=r"'observation'.*value network"):
        _make(name, critic)(data.exclude("observation"))
    with pytest.raises(KeyError, match=r"'state_value'.*no value_network.*set_keys\(value="):
        _make(name, None)(data)


def test_estimator_reward_key_typo_suggests_match(critic, data):
    est = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic).set_keys(reward="rewards")
    with pytest.raises(KeyError, match=r"Did you mean \('next', 'reward'\)"):
        est(data)


def test_estimator_rejects_bad_shapes(critic, data):
    bad = TensorDict(
        {"observation": data["observation"], "next": data["next"].exclude("reward")},
        data.batch_size,
    )
    bad["next", "reward"] = torch.zeros(*data.batch_size, 2)
    with pytest.raises(ValueError, match=r"'next', 'reward'.*shape.*time is the last batch dim"):
        GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(bad)
    with pytest.raises(ValueError, match="last dim is time"):
        GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(
            data[0] if data.ndim == 1 else data[0, 0]
        )


def test_estimator_rejects_bad_hyperparameters(critic):
    with pytest.raises(ValueError, match=r"GAE: gamma must lie in \(0, 1\], got 1.5"):
        GAE(gamma=1.5, lmbda=0.9, value_network=critic)
    with pytest.raises(ValueError, match=r"TDLambdaEstimator: lmbda must lie in \[0, 1\]"):
        TDLambdaEstimator(gamma=0.9, lmbda=-0.1, value_network=critic)
    with pytest.raises(ValueError, match=r"TD0Estimator: gamma must lie in \[0, 1\], got -0.1"):
        TD0Estimator(gamma=-0.1, value_network=critic)
    with pytest.raises(ValueError, match="unknown key name 'rewards'.*accepted"):
        GAE(gamma=0.9, lmbda=0.9, value_network=critic).set_keys(rewards="r")
    with pytest.raises(TypeError, match="value_network must be a TensorDict module"):
        GAE(gamma=0.9, lmbda=0.9, value_network=nn.Linear(3, 1))


def test_value_estimate_next_value_with_gae_computes_state_value(critic, data):
    nv = torch.zeros(*data.batch_size, 1)
    target = GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic).value_estimate(data, next_value=nv)
    with torch.no_grad():
        v = critic.module(data["observation"])
    r, done, term = data["next", "reward"], data["next", "done"], data["next", "terminated"]
    expected = vec_generalized_advantage_estimate(GAMMA, LMBDA, v, nv, r, done, term)[1]
    torch.testing.assert_close(target, expected)


def test_skip_existing_reuses_values(critic, data):
    data["state_value"] = torch.zeros(*data.batch_size, 1)
    data["next", "state_value"] = torch.zeros(*data.batch_size, 1)
    GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic, skip_existing=True)(data)
    torch.testing.assert_close(data["value_target"], data["advantage"])  # V == 0
    GAE(gamma=GAMMA, lmbda=LMBDA, value_network=critic)(data)  # recomputes by default
    assert data["state_value"].abs().sum() > 0
