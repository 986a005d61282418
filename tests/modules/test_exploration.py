"""Exploration: the exploration type switch, e-greedy, additive Gaussian and OU noise."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    interaction_type,
)
from torch import nn

from torchrl_lite.data import Bounded, Categorical, Composite, OneHot
from torchrl_lite.modules import (
    Actor,
    AdditiveGaussianModule,
    AdditiveGaussianWrapper,
    EGreedyModule,
    EGreedyWrapper,
    ExplorationType,
    OrnsteinUhlenbeckProcessModule,
    OrnsteinUhlenbeckProcessWrapper,
    QValueActor,
    exploration_type,
    set_exploration_type,
)

OFF_TYPES = [ExplorationType.DETERMINISTIC, ExplorationType.MODE, ExplorationType.MEAN]


# -- the exploration type --------------------------------------------------------------------
def test_exploration_type_is_tensordict_interaction_type():
    assert ExplorationType is InteractionType
    assert exploration_type() is None
    with set_exploration_type(ExplorationType.RANDOM):
        assert exploration_type() is ExplorationType.RANDOM
        assert interaction_type() is InteractionType.RANDOM
    assert exploration_type() is None


def test_envs_utils_reexports_exploration_type():
    from torchrl_lite.envs import utils

    assert utils.ExplorationType is ExplorationType
    assert utils.set_exploration_type is set_exploration_type


def test_deterministic_makes_tensordict_probabilistic_module_use_mode():
    module = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=torch.distributions.Normal,
        default_interaction_type=InteractionType.RANDOM,
    )
    td = TensorDict(loc=torch.full((1000,), 2.0), scale=torch.ones(1000))
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(module(td.clone())["action"], td["loc"])
    assert module(td.clone())["action"].std() > 0.5  # the module's default: RANDOM


# -- annealing ----------------------------------------------------------------------------------
@pytest.mark.parametrize("frames_per_step", [1, 7])
def test_egreedy_eps_follows_linear_schedule_and_clamps(frames_per_step):
    eps_init, eps_end, n = 1.0, 0.1, 100
    module = EGreedyModule(OneHot(4), eps_init=eps_init, eps_end=eps_end, annealing_num_steps=n)
    assert float(module.eps) == pytest.approx(eps_init)
    for k in range(1, 40):
        module.step(frames_per_step)
        frames = k * frames_per_step
        expected = max(eps_end, eps_init - frames * (eps_init - eps_end) / n)
        assert float(module.eps) == pytest.approx(expected, abs=1e-6)
    module.step(10_000)
    assert float(module.eps) == pytest.approx(eps_end)


def test_egreedy_schedule_survives_state_dict():
    module = EGreedyModule(OneHot(4), annealing_num_steps=10)
    module.step(4)
    clone = EGreedyModule(OneHot(4), annealing_num_steps=10)
    clone.load_state_dict(module.state_dict())
    assert float(clone.eps) == pytest.approx(float(module.eps))
    clone.step(1)
    module.step(1)
    assert float(clone.eps) == pytest.approx(float(module.eps))


def test_additive_gaussian_sigma_anneals():
    module = AdditiveGaussianModule(
        Bounded(-1.0, 1.0, shape=(1,)), sigma_init=2.0, sigma_end=0.5, annealing_num_steps=4
    )
    values = []
    for _ in range(6):
        values.append(float(module.sigma))
        module.step()
    assert values == pytest.approx([2.0, 1.625, 1.25, 0.875, 0.5, 0.5])


def test_ou_eps_anneals():
    module = OrnsteinUhlenbeckProcessModule(
        Bounded(-1.0, 1.0, shape=(1,)), eps_init=1.0, eps_end=0.0, annealing_num_steps=10
    )
    module.step(3)
    assert float(module.eps) == pytest.approx(0.7)


# -- e-greedy ---------------------------------------------------------------------------------
def _greedy_one_hot(batch: int, n: int) -> TensorDict:
    action = torch.zeros(batch, n, dtype=torch.long)
    action[:, 0] = 1
    return TensorDict(action=action, batch_size=[batch])


@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0])
def test_egreedy_random_action_frequency_matches_eps(eps):
    torch.manual_seed(0)
    n, batch = 4, 40_000
    module = EGreedyModule(OneHot(n), eps_init=eps, eps_end=eps)
    with set_exploration_type(ExplorationType.RANDOM):
        out = module(_greedy_one_hot(batch, n))
    assert OneHot(n).is_in(out["action"])
    changed = (out["action"][:, 0] == 0).float().mean().item()
    # a random action is uniform, so it differs from the greedy one w.p. (n - 1) / n
    assert changed == pytest.approx(eps * (n - 1) / n, abs=0.01)


@pytest.mark.parametrize("kind", OFF_TYPES)
def test_egreedy_off_under_deterministic(kind):
    module = EGreedyModule(OneHot(4), eps_init=1.0, eps_end=1.0)
    td = _greedy_one_hot(1000, 4)
    with set_exploration_type(kind):
        out = module(td.clone())
    torch.testing.assert_close(out["action"], td["action"])


def test_egreedy_on_when_no_exploration_type_is_set():
    module = EGreedyModule(OneHot(4), eps_init=1.0, eps_end=1.0)
    out = module(_greedy_one_hot(1000, 4))
    assert (out["action"][:, 0] == 0).any()


def test_egreedy_categorical_and_action_mask():
    torch.manual_seed(0)
    module = EGreedyModule(Categorical(5), eps_init=1.0, eps_end=1.0, action_mask_key="mask")
    mask = torch.tensor([False, True, False, True, False]).expand(2000, 5)
    td = TensorDict(action=torch.ones(2000, dtype=torch.long), mask=mask, batch_size=[2000])
    out = module(td)
    assert set(out["action"].unique().tolist()) == {1, 3}


def test_egreedy_one_draw_per_env_for_batched_spec():
    torch.manual_seed(0)
    spec = OneHot(3).expand(8, 3)  # an env batch of 8 inside the spec
    module = EGreedyModule(spec, eps_init=0.5, eps_end=0.5)
    changed = []
    for _ in range(200):
        td = _greedy_one_hot(8, 3)
        changed.append(module(td)["action"][:, 0] == 0)
    frac = torch.stack(changed).float().mean(0)
    assert bool(((frac > 0.2) & (frac < 0.5)).all())  # each env explores independently


def test_seed_egreedy_wrapper_random_vs_deterministic():
    torch.manual_seed(0)
    policy = QValueActor(nn.Linear(4, 3), spec=OneHot(3))
    policy_explore = EGreedyWrapper(policy)
    tensordict = TensorDict(observation=torch.randn(2000, 4), batch_size=[2000])
    greedy = policy(tensordict.clone())["action"]
    with set_exploration_type(ExplorationType.RANDOM):
        explored = policy_explore(tensordict.clone())["action"]  # epsilon-greedy
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        exploited = policy_explore(tensordict.clone())["action"]  # not epsilon-greedy
    torch.testing.assert_close(exploited, greedy)
    differs = (explored != greedy).any(-1).float().mean().item()
    assert differs == pytest.approx(2 / 3, abs=0.04)  # eps_init=1: uniform actions
    policy_explore.step(500)
    assert float(policy_explore.eps) == pytest.approx(1.0 - 500 * 0.9 / 1000)
    assert policy_explore.td_module is policy


def test_egreedy_without_spec_raises():
    with pytest.raises(ValueError, match="needs the action spec"):
        EGreedyModule(None)
    with pytest.raises(ValueError, match="needs the action spec"):
        EGreedyModule(Composite(observation=Bounded(-1.0, 1.0, shape=(3,))))
    spec_less = QValueActor(nn.Linear(4, 3), action_space="one_hot")
    with pytest.raises(ValueError, match="EGreedyWrapper needs the action spec"):
        EGreedyWrapper(spec_less)


def test_egreedy_bad_eps_raises():
    with pytest.raises(ValueError, match="eps_init must be in"):
        EGreedyModule(OneHot(2), eps_init=1.5)
    with pytest.raises(ValueError, match="annealing_num_steps"):
        EGreedyModule(OneHot(2), annealing_num_steps=0)


def test_egreedy_missing_action_key():
    module = EGreedyModule(OneHot(2))
    with pytest.raises(KeyError, match="'action'.*Did you mean 'actions'"):
        module(TensorDict(actions=torch.zeros(2)))


# -- additive Gaussian --------------------------------------------------------------------------
def test_additive_gaussian_noise_std_is_sigma():
    torch.manual_seed(0)
    sigma = 0.3
    spec = Bounded(-100.0, 100.0, shape=(2,))
    module = AdditiveGaussianModule(spec, sigma_init=sigma, sigma_end=sigma)
    td = TensorDict(action=torch.full((50_000, 2), 0.5), batch_size=[50_000])
    noise = module(td.clone())["action"] - 0.5
    assert noise.mean().item() == pytest.approx(0.0, abs=0.01)
    assert noise.std().item() == pytest.approx(sigma, rel=0.02)


def test_additive_gaussian_mean_and_std_scale_noise():
    torch.manual_seed(0)
    module = AdditiveGaussianModule(
        Bounded(-100.0, 100.0, shape=(1,)), sigma_init=2.0, sigma_end=2.0, mean=1.0, std=0.5
    )
    noise = module(TensorDict(action=torch.zeros(50_000, 1), batch_size=[50_000]))["action"]
    assert noise.mean().item() == pytest.approx(2.0, abs=0.02)  # sigma * mean
    assert noise.std().item() == pytest.approx(1.0, rel=0.02)  # sigma * std


def test_additive_gaussian_clipped_into_spec():
    torch.manual_seed(0)
    spec = Bounded(-1.0, 1.0, shape=(1,))
    module = AdditiveGaussianModule(spec, sigma_init=5.0, sigma_end=5.0)
    out = module(TensorDict(action=torch.zeros(1000, 1), batch_size=[1000]))["action"]
    assert spec.is_in(out)
    assert bool((out.abs() == 1.0).any())
    unsafe = AdditiveGaussianModule(spec, sigma_init=5.0, sigma_end=5.0, safe=False)
    assert not spec.is_in(
        unsafe(TensorDict(action=torch.zeros(1000, 1), batch_size=[1000]))["action"]
    )


@pytest.mark.parametrize("kind", OFF_TYPES)
def test_additive_gaussian_off_under_deterministic(kind):
    module = AdditiveGaussianModule(Bounded(-1.0, 1.0, shape=(1,)))
    td = TensorDict(action=torch.zeros(100, 1), batch_size=[100])
    with set_exploration_type(kind):
        torch.testing.assert_close(module(td.clone())["action"], td["action"])


def test_additive_gaussian_wrapper_takes_policy_spec():
    spec = Bounded(-1.0, 1.0, shape=(1,))
    actor = Actor(nn.Linear(3, 1), spec=spec)
    policy = AdditiveGaussianWrapper(actor, sigma_init=3.0, sigma_end=1.0, annealing_num_steps=2)
    td = TensorDict(observation=torch.randn(500, 3), batch_size=[500])
    with set_exploration_type(ExplorationType.RANDOM):
        assert spec.is_in(policy(td.clone())["action"])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        torch.testing.assert_close(policy(td.clone())["action"], actor(td.clone())["action"])
    policy.step(1)
    assert float(policy.sigma) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="needs the action spec"):
        AdditiveGaussianWrapper(Actor(nn.Linear(3, 1)))


# -- Ornstein-Uhlenbeck -------------------------------------------------------------------------
def _ou(**kwargs) -> OrnsteinUhlenbeckProcessModule:
    spec = Bounded(-1e6, 1e6, shape=(1,))
    kwargs = {"eps_init": 1.0, "eps_end": 1.0, **kwargs}
    return OrnsteinUhlenbeckProcessModule(spec, **kwargs)


def test_ou_noise_follows_the_ou_update():
    """x_{t+1} = x_t + theta (mu - x_t) dt + sigma sqrt(dt) N(0, 1), per env."""
    torch.manual_seed(0)
    theta, mu, sigma, dt = 0.5, 0.2, 0.8, 0.1
    module = _ou(theta=theta, mu=mu, sigma=sigma, dt=dt)
    n_envs, steps = 2000, 30
    td = TensorDict(action=torch.zeros(n_envs, 1), batch_size=[n_envs])
    noises = []
    for _ in range(steps):
        td.set("action", torch.zeros(n_envs, 1))
        td = module(td)
        torch.testing.assert_close(td["action"], td["_ou_prev_noise"])  # eps = 1, action 0
        noises.append(td["_ou_prev_noise"].clone())
    x = torch.stack(noises)  # [T, n_envs, 1]
    residual = x[1:] - (x[:-1] + theta * (mu - x[:-1]) * dt)
    assert residual.mean().item() == pytest.approx(0.0, abs=0.01)
    assert residual.std().item() == pytest.approx(sigma * math.sqrt(dt), rel=0.03)
    # temporally correlated: consecutive noises are far more alike than independent draws
    corr = torch.corrcoef(torch.stack([x[-2].flatten(), x[-1].flatten()]))[0, 1].item()
    assert corr > 0.9
    assert td["_ou_steps"].flatten().tolist() == [steps] * n_envs


def test_ou_noise_reset_where_is_init():
    torch.manual_seed(0)
    module = _ou(sigma=1.0, dt=1.0)
    td = TensorDict(
        action=torch.zeros(4, 1), is_init=torch.zeros(4, 1, dtype=torch.bool), batch_size=[4]
    )
    for _ in range(5):
        td.set("action", torch.zeros(4, 1))
        td = module(td)
    before = td["_ou_prev_noise"].clone()
    reset = torch.tensor([[True], [False], [True], [False]])
    td.set("is_init", reset)
    td.set("action", torch.zeros(4, 1))
    torch.manual_seed(1)
    td = module(td)
    torch.manual_seed(1)
    fresh = torch.randn(4, 1)
    # reset envs restart from x0 = 0: x_1 = 0 + theta * (mu - 0) * dt + sigma sqrt(dt) N
    theta, mu = module.theta, module.mu
    expected_reset = theta * mu + fresh
    expected_kept = before + theta * (mu - before) + fresh
    expected = torch.where(reset, expected_reset, expected_kept)
    torch.testing.assert_close(td["_ou_prev_noise"], expected)
    assert td["_ou_steps"].flatten().tolist() == [1, 6, 1, 6]


def test_ou_sigma_anneals_per_trajectory():
    module = _ou(sigma=1.0, sigma_min=0.2, n_steps_annealing=8)
    steps = torch.tensor([[0], [4], [8], [100]])
    torch.testing.assert_close(module._sigma(steps).flatten(), torch.tensor([1.0, 0.6, 0.2, 0.2]))


@pytest.mark.parametrize("kind", OFF_TYPES)
def test_ou_off_under_deterministic(kind):
    module = _ou()
    td = TensorDict(action=torch.zeros(10, 1), batch_size=[10])
    with set_exploration_type(kind):
        out = module(td.clone())
    torch.testing.assert_close(out["action"], td["action"])
    assert "_ou_prev_noise" not in out.keys()


def test_ou_clipped_into_spec_and_wrapper():
    torch.manual_seed(0)
    spec = Bounded(-0.1, 0.1, shape=(1,))
    actor = Actor(nn.Linear(3, 1), spec=spec)
    policy = OrnsteinUhlenbeckProcessWrapper(actor, sigma=50.0, annealing_num_steps=10)
    td = TensorDict(observation=torch.randn(200, 3), batch_size=[200])
    for _ in range(3):
        td = policy(td)
    assert spec.is_in(td["action"])
    policy.step(5)
    assert float(policy.eps) == pytest.approx(1.0 - 5 * 0.9 / 10)


def test_ou_bad_is_init_shape_raises():
    module = _ou()
    td = module(TensorDict(action=torch.zeros(4, 1), batch_size=[4]))
    bad = TensorDict(
        action=torch.zeros(4, 1),
        _ou_prev_noise=td["_ou_prev_noise"],
        _ou_steps=td["_ou_steps"],
        is_init=torch.zeros(4, 2, dtype=torch.bool),
        batch_size=[4],
    )
    with pytest.raises(ValueError, match="is_init"):
        module(bad)


def test_ou_state_travels_through_env_rollout():
    from torchrl_lite.envs import GymEnv

    env = GymEnv("Pendulum-v1")
    policy = OrnsteinUhlenbeckProcessWrapper(Actor(nn.Linear(3, 1), spec=env.action_spec))
    with set_exploration_type(ExplorationType.RANDOM), torch.no_grad():
        rollout = env.rollout(5, policy=policy)
    assert rollout["_ou_steps"].flatten().tolist() == [1, 2, 3, 4, 5]
    assert env.action_spec.is_in(rollout["action"])
    env.close()
