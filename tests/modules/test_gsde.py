"""gSDE (GSDEHead / GSDENormal) and ClippedProbabilisticActor."""

import math

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
from torchrl_lite.modules import (
    ClippedProbabilisticActor,
    GSDEHead,
    GSDENormal,
    IndependentNormal,
)

RANDOM, DETERMINISTIC = ExplorationType.RANDOM, ExplorationType.DETERMINISTIC


def _head(freq=-1, latent=5, act=2, seed=0):
    torch.manual_seed(seed)
    head = GSDEHead(latent, act, log_sigma_init=-1.0, sample_freq=freq)
    with torch.no_grad():  # distinct entries, so a wrong contraction shows
        head.log_sigma.copy_(torch.linspace(-2.0, 0.5, latent * act).reshape(latent, act))
    return head


def test_log_prob_matches_the_hand_written_formula():
    head = _head()
    phi = torch.rand(3, 5) + 0.1
    loc, scale, _ = head(phi)
    action = torch.randn(3, 2)
    dist = GSDENormal(loc, scale)
    sigma2 = head.log_sigma.detach().exp() ** 2  # [latent, act]
    expected = torch.zeros(3)
    for b in range(3):
        for a in range(2):
            var = sum(phi[b, k] ** 2 * sigma2[k, a] for k in range(5)) + head.epsilon
            mu = float(loc[b, a].detach())
            expected[b] += -0.5 * (action[b, a] - mu) ** 2 / var - 0.5 * math.log(2 * math.pi * var)
    torch.testing.assert_close(dist.log_prob(action), expected, rtol=1e-5, atol=1e-5)
    assert dist.log_prob(action).shape == (3,)  # summed over the action dims


def test_noise_is_latent_times_held_matrix_and_resampled_every_sample_freq_steps():
    head = _head(freq=3)
    phi = torch.rand(4, 5)
    with set_exploration_type(RANDOM):
        noises = [head(phi)[2] for _ in range(7)]
        matrix = head.noise_matrices  # [n, latent, act]
    assert matrix.shape == (4, 5, 2)
    # calls 0-2 share one draw, 3-5 the next, 6 a third
    for i in (1, 2):
        torch.testing.assert_close(noises[i], noises[0])
    for i in (4, 5):
        torch.testing.assert_close(noises[i], noises[3])
    assert not torch.allclose(noises[3], noises[0])
    assert not torch.allclose(noises[6], noises[3])
    expected = torch.einsum("nl,nla->na", phi, matrix)
    torch.testing.assert_close(noises[6], expected)
    # the held noise is a sample of N(0, phi^2 sigma^2) per row: W entries ~ N(0, sigma^2)
    z = matrix / head.log_sigma.detach().exp()
    assert abs(float(z.mean())) < 1.0 and 0.2 < float(z.std()) < 3.0


def test_noise_resampled_only_for_rows_at_an_episode_start():
    head = _head(freq=0)  # never on a schedule
    phi = torch.rand(3, 5)
    no = torch.zeros(3, 1, dtype=torch.bool)
    with set_exploration_type(RANDOM):
        first = head(phi, no)[2]
        same = head(phi, no)[2]
        starts = torch.tensor([[False], [True], [False]])
        after = head(phi, starts)[2]
    torch.testing.assert_close(same, first)
    torch.testing.assert_close(after[[0, 2]], first[[0, 2]])
    assert not torch.allclose(after[1], first[1])
    head.reset_noise()
    with set_exploration_type(RANDOM):
        assert not torch.allclose(head(phi, no)[2], after)


def test_new_batch_size_draws_new_matrices_and_sigma_applies_at_once():
    head = _head(freq=0)
    with set_exploration_type(RANDOM):
        head(torch.rand(2, 5))
        assert head.noise_matrices.shape[0] == 2
        phi = torch.rand(6, 5)
        before = head(phi)[2]
        with torch.no_grad():
            head.log_sigma.add_(math.log(2.0))  # new weights: same Z, twice the sigma
        torch.testing.assert_close(head(phi)[2], 2 * before)
    assert head.noise_matrices.shape[0] == 6
    assert "_z" not in head.state_dict() and set(head.state_dict()) == {
        "log_sigma",
        "mean.weight",
        "mean.bias",
    }


def test_no_noise_outside_random_exploration_and_state_untouched():
    head = _head(freq=2)
    phi = torch.rand(3, 5)
    with set_exploration_type(RANDOM):
        head(phi)
    held = head.noise_matrices.clone()
    for mode in (DETERMINISTIC, None):
        if mode is None:
            out = head(phi)
        else:
            with set_exploration_type(mode):
                out = head(phi)
        assert torch.equal(out[2], torch.zeros(3, 2))
    torch.testing.assert_close(head.noise_matrices, held)
    assert head._calls == 1


def test_deterministic_sample_is_the_mean_and_sample_is_loc_plus_noise():
    loc, scale = torch.randn(4, 2), torch.rand(4, 2) + 0.1
    noise = torch.randn(4, 2)
    dist = GSDENormal(loc, scale, noise)
    assert torch.equal(dist.mode, loc) and torch.equal(dist.deterministic_sample, loc)
    torch.testing.assert_close(dist.sample(), loc + noise)
    assert dist.sample((3,)).shape == (3, 4, 2)  # a sample shape: plain Normal draws
    torch.testing.assert_close(
        dist.entropy(), torch.distributions.Normal(loc, scale).entropy().sum(-1)
    )


def test_gradients_reach_log_sigma_not_the_features_through_the_scale():
    head = _head()
    phi = (torch.rand(8, 5) + 0.1).requires_grad_()
    loc, scale, _ = head(phi)
    scale.sum().backward()
    assert head.log_sigma.grad is not None and float(head.log_sigma.grad.abs().sum()) > 0
    assert phi.grad is None  # the features are detached for the variance
    head.zero_grad()
    loc, scale, _ = head(phi)
    GSDENormal(loc, scale).log_prob(torch.randn(8, 2)).sum().backward()
    assert float(head.log_sigma.grad.abs().sum()) > 0
    assert float(head.mean.weight.grad.abs().sum()) > 0
    assert phi.grad is not None  # through the mean


def _gsde_actor(freq=4):
    head = GSDEHead(5, 2, log_sigma_init=-0.5, sample_freq=freq)
    net = TensorDictModule(
        torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), head),
        in_keys=["observation"],
        out_keys=["loc", "scale", "sde_noise"],
    )
    return ClippedProbabilisticActor(
        net,
        in_keys={"loc": "loc", "scale": "scale", "noise": "sde_noise"},
        low=-1.0,
        high=1.0,
        distribution_class=GSDENormal,
        return_log_prob=True,
    )


def test_actor_writes_raw_sample_its_log_prob_and_the_clipped_action():
    torch.manual_seed(1)
    actor = _gsde_actor()
    with torch.no_grad():
        actor.module[0].module[0].weight.mul_(20)  # large means: some clipping
    td = TensorDict(observation=torch.randn(64, 3), batch_size=[64])
    with set_exploration_type(RANDOM):
        td = actor(td)
    raw, action = td["raw_action"], td["action"]
    torch.testing.assert_close(raw, td["loc"] + td["sde_noise"])
    torch.testing.assert_close(action, raw.clamp(-1.0, 1.0))
    assert bool((raw.abs() > 1).any())
    dist = actor.get_dist(td.select("observation"))
    torch.testing.assert_close(td["sample_log_prob"].reshape(-1), dist.log_prob(raw))
    assert "action" in actor.out_keys and "raw_action" in actor.out_keys
    with set_exploration_type(DETERMINISTIC):
        det = actor(td.select("observation"))
    torch.testing.assert_close(det["raw_action"], det["loc"])


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"out_keys": ["a"]}, ValueError, "out_keys is fixed to \\[raw_action_key\\].*set raw"),
        ({"raw_action_key": "action"}, ValueError, "raw_action_key must differ from 'action'"),
        ({"low": 1.0, "high": -1.0}, ValueError, "low must be <= high.*low=1.0"),
        ({"high": float("inf")}, ValueError, "high must be finite.*bounded action space"),
    ],
)
def test_clipped_actor_bad_arguments(kwargs, error, match):
    net = TensorDictModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["p"])
    args = {"low": -1.0, "high": 1.0, "distribution_class": IndependentNormal, **kwargs}
    with pytest.raises(error, match=match):
        ClippedProbabilisticActor(net, ["loc", "scale"], **args)


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (lambda: GSDEHead(0, 2), ValueError, "latent_dim must be a positive int, got 0"),
        (lambda: GSDEHead(4, 2, sample_freq=2.5), TypeError, "sample_freq must be an int.*2.5"),
        (lambda: GSDEHead(4, 2)(torch.zeros(3, 5)), ValueError, "size 5.*latent_dim=4"),
        (
            lambda: GSDENormal(torch.zeros(3, 2), torch.ones(3, 2), torch.zeros(3, 1)),
            ValueError,
            "noise has shape \\[3, 1\\], expected the shape of loc \\[3, 2\\]",
        ),
    ],
)
def test_gsde_bad_arguments(make, error, match):
    with pytest.raises(error, match=match):
        make()
