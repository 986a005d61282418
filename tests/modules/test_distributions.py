"""Distributions: TanhNormal maths and bounds, IndependentNormal, TanhDelta, masked categoricals."""

import math

import pytest
import torch
from tensordict.nn import InteractionType, ProbabilisticTensorDictModule, TensorDictModule
from tensordict.nn import NormalParamExtractor as TDNormalParamExtractor
from torch import distributions as D
from torch import nn

import torchrl_lite.modules.distributions as dists
from torchrl_lite.modules import (
    Categorical,
    Delta,
    IndependentNormal,
    MaskedCategorical,
    MaskedOneHotCategorical,
    NormalParamExtractor,
    OneHotCategorical,
    TanhDelta,
    TanhNormal,
    TruncatedNormal,
    biased_softplus,
)


def test_distributions_reexports():
    assert NormalParamExtractor is TDNormalParamExtractor
    for name in dists.__all__:
        assert getattr(dists, name) is not None
    assert Delta is dists.Delta and biased_softplus is dists.biased_softplus


# -- TanhNormal ---------------------------------------------------------------------------
def _reference_log_prob(loc, scale, low, high, x):
    """log p(a) for a = c + h tanh(x), x ~ N(loc, scale), by change of variables (float64)."""
    h = (high - low) / 2
    jac = h * (1 - torch.tanh(x) ** 2)
    return (D.Normal(loc, scale).log_prob(x) - jac.log()).sum(-1)


def test_tanh_normal_log_prob_matches_change_of_variables_on_1e5_samples():
    torch.manual_seed(1)
    n = 100_000
    loc = torch.randn(n, 2, dtype=torch.float64)
    scale = torch.rand(n, 2, dtype=torch.float64) + 0.1
    low = torch.tensor([-2.0, 0.0], dtype=torch.float64)
    high = torch.tensor([1.0, 3.0], dtype=torch.float64)
    x = loc + scale * torch.randn(n, 2, dtype=torch.float64)
    action = (high + low) / 2 + (high - low) / 2 * torch.tanh(x)
    dist = TanhNormal(loc, scale, low=low, high=high)
    expected = _reference_log_prob(loc, scale, low, high, x)
    got = dist.log_prob(action)
    assert got.shape == (n,)
    assert got.isfinite().all()
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-6)


def test_tanh_normal_log_prob_float32():
    x = 0.3 + 0.8 * torch.randn(100_000, 1)
    x = x[x.abs() < 4].unsqueeze(-1)  # away from float32 saturation of tanh
    dist = TanhNormal(torch.full_like(x, 0.3), torch.full_like(x, 0.8))
    expected = _reference_log_prob(0.3, 0.8, -1.0, 1.0, x.double()).float()
    torch.testing.assert_close(dist.log_prob(torch.tanh(x)), expected, rtol=1e-4, atol=1e-4)


def test_tanh_normal_density_integrates_to_one():
    dist = TanhNormal(torch.tensor([[0.5]]), torch.tensor([[1.3]]), low=-3.0, high=5.0)
    grid = torch.linspace(-3.0, 5.0, 200_001, dtype=torch.float64)[1:-1].unsqueeze(-1).unsqueeze(-1)
    dist64 = TanhNormal(
        torch.tensor([[0.5]], dtype=torch.float64),
        torch.tensor([[1.3]], dtype=torch.float64),
        low=-3.0,
        high=5.0,
    )
    density = dist64.log_prob(grid).exp().reshape(-1)
    integral = torch.trapezoid(density, dx=8.0 / 200_000)
    assert abs(integral.item() - 1.0) < 1e-3
    assert dist.sample((1000,)).shape == (1000, 1, 1)


def test_tanh_normal_samples_and_mode_inside_bounds():
    loc = torch.tensor([[-50.0, 0.0, 50.0]])
    dist = TanhNormal(loc, torch.ones(1, 3), low=-2.0, high=4.0)
    samples = dist.sample((1000,))
    assert ((samples >= -2.0) & (samples <= 4.0)).all()
    mode = dist.mode
    assert ((mode >= -2.0) & (mode <= 4.0)).all()
    torch.testing.assert_close(mode[0, 1], torch.tensor(1.0))
    torch.testing.assert_close(dist.deterministic_sample, mode)
    moderate = TanhNormal(torch.tensor([3.0]), torch.ones(1), low=-2.0, high=4.0)
    assert -2.0 < moderate.mode.item() < 4.0


def test_tanh_normal_log_prob_finite_with_finite_gradients_at_the_bounds():
    loc = torch.tensor([[0.2, -0.3], [1.0, 0.0]], requires_grad=True)
    scale = torch.tensor([[0.5, 1.0], [0.7, 2.0]], requires_grad=True)
    low, high = torch.tensor([-1.0, -2.0]), torch.tensor([1.0, 3.0])
    dist = TanhNormal(loc, scale, low=low, high=high)
    value = torch.stack([high, low]).clone().requires_grad_(True)  # exactly at the bounds
    lp = dist.log_prob(value)
    assert lp.isfinite().all()
    lp.sum().backward()
    for grad in (loc.grad, scale.grad, value.grad):
        assert grad is not None and grad.isfinite().all()
    # also from a float that rounds past the bound
    assert (
        TanhNormal(torch.zeros(1), torch.ones(1))
        .log_prob(torch.tensor([1.0 + 1e-7]))
        .isfinite()
        .all()
    )


def test_tanh_normal_rsample_gradients_flow():
    loc = torch.zeros(8, 2, requires_grad=True)
    scale = torch.ones(8, 2, requires_grad=True)
    dist = TanhNormal(loc, scale, low=-1.0, high=1.0)
    action = dist.rsample()
    (action**2).sum().backward()
    assert loc.grad.abs().sum() > 0 and scale.grad.abs().sum() > 0
    assert not dist.sample().requires_grad


def test_tanh_normal_per_element_bounds_broadcast():
    low, high = torch.tensor([0.0, -10.0, 5.0]), torch.tensor([1.0, 10.0, 6.0])
    dist = TanhNormal(torch.randn(50, 3), torch.rand(50, 3) + 0.5, low=low, high=high)
    s = dist.sample((20,))
    assert s.shape == (20, 50, 3)
    assert ((s >= low) & (s <= high)).all()
    assert (s[..., 1].abs() > 1).any()  # the wide dim is actually used
    torch.testing.assert_close(
        TanhNormal(torch.zeros(3), torch.ones(3), low=low, high=high).mode, (low + high) / 2
    )


def test_tanh_normal_tanh_loc_upscale_and_event_dims():
    dist = TanhNormal(torch.tensor([100.0]), torch.ones(1), upscale=2.0, tanh_loc=True)
    torch.testing.assert_close(dist.loc, torch.tensor([2.0]))
    d0 = TanhNormal(torch.zeros(4, 2), torch.ones(4, 2), event_dims=0)
    assert d0.log_prob(torch.zeros(4, 2)).shape == (4, 2)
    assert TanhNormal(torch.zeros(4, 2), torch.ones(4, 2)).batch_shape == (4,)


def test_tanh_normal_bad_bounds_raise():
    with pytest.raises(ValueError, match="low < high"):
        TanhNormal(torch.zeros(2), torch.ones(2), low=1.0, high=1.0)
    with pytest.raises(ValueError, match="low < high"):
        TanhNormal(
            torch.zeros(2),
            torch.ones(2),
            low=torch.tensor([0.0, 2.0]),
            high=torch.tensor([1.0, 1.0]),
        )


def test_tanh_normal_entropy_estimate():
    dist = TanhNormal(torch.zeros(2000, 1), torch.full((2000, 1), 0.3), low=-1.0, high=1.0)
    ent = dist.entropy()
    assert ent.shape == (2000,)
    # for small scale tanh is nearly linear at 0: entropy ~ that of N(0, 0.3)
    expected = 0.5 * math.log(2 * math.pi * math.e * 0.09)
    assert abs(ent.mean().item() - expected) < 0.1


def test_tanh_normal_entropy_falls_as_scale_grows_past_saturation():
    # H(a) = H(x) + E log|da/dx| ~ log s - 2 E|x| for a wide Normal: a squashed Normal that
    # piles its mass on the bounds has a very low entropy, and the gradient must say so
    # (estimating it from atanh of samples that round to +-1 clamps them, cutting the
    # Jacobian term and making the estimate grow with the scale instead)
    torch.manual_seed(0)
    log_scale = torch.tensor([[math.log(20.0)]] * 4000, requires_grad=True)
    dist = TanhNormal(torch.zeros(4000, 1), log_scale.exp())
    ent = dist.entropy().mean()
    ent.backward()
    assert ent.item() < -15  # reference: log 20 + const - 2 * 20 * sqrt(2/pi) ~ -26
    assert log_scale.grad.sum().item() < 0  # a larger scale means a lower entropy
    x = torch.randn(200_000, dtype=torch.float64) * 20.0
    log_jac = 2 * (math.log(2) - x.abs() - torch.nn.functional.softplus(-2 * x.abs()))
    ref = D.Normal(0.0, 20.0).log_prob(x) - log_jac  # log(1 - tanh^2), without underflow
    assert abs(ent.item() - (-ref.mean().item())) < 1.5


def test_tanh_normal_log_prob_of_a_training_sample_uses_its_pre_tanh_value():
    loc = torch.zeros(3, 1, requires_grad=True)
    dist = TanhNormal(loc, torch.full((3, 1), 10.0))
    torch.manual_seed(3)
    action = dist.rsample()  # differentiable: scored exactly, even where it rounds to +-1
    torch.manual_seed(3)
    x = (loc + 10.0 * torch.randn(3, 1)).detach().double()
    expected = _reference_log_prob(
        torch.zeros(3, 1, dtype=torch.float64), 10.0, -1.0, 1.0, x
    ).float()
    torch.testing.assert_close(dist.log_prob(action), expected, rtol=1e-4, atol=1e-3)
    # a sample drawn without gradients (collection) is scored from its value, as a loss
    # will score it again later: the two agree exactly
    with torch.no_grad():
        sampled = dist.rsample()
        first = dist.log_prob(sampled)
    torch.testing.assert_close(first, dist.log_prob(sampled.clone()))


def test_tanh_normal_in_probabilistic_module():
    from tensordict import TensorDict

    module = ProbabilisticTensorDictModule(
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
        default_interaction_type=InteractionType.DETERMINISTIC,
        return_log_prob=True,
    )
    td = TensorDict({"loc": torch.zeros(3, 1), "scale": torch.ones(3, 1)}, [3])
    out = module(td)
    torch.testing.assert_close(out["action"], torch.zeros(3, 1))
    assert out["action_log_prob"].shape == (3,)


# -- other continuous ---------------------------------------------------------------------
def test_independent_normal_log_prob_is_sum_of_normals():
    loc, scale = torch.randn(5, 3), torch.rand(5, 3) + 0.1
    dist = IndependentNormal(loc, scale)
    value = torch.randn(5, 3)
    torch.testing.assert_close(dist.log_prob(value), D.Normal(loc, scale).log_prob(value).sum(-1))
    torch.testing.assert_close(dist.mode, loc)
    torch.testing.assert_close(dist.deterministic_sample, loc)
    assert dist.rsample().shape == (5, 3)
    squashed = IndependentNormal(
        torch.tensor([[20.0]]), torch.ones(1, 1), upscale=5.0, tanh_loc=True
    )
    assert squashed.mode.item() < 5.0


def test_tanh_delta():
    param = torch.tensor([[0.0, 100.0, -100.0]])
    dist = TanhDelta(param, low=torch.tensor([-1.0, 0.0, 2.0]), high=torch.tensor([1.0, 4.0, 3.0]))
    torch.testing.assert_close(dist.mode, torch.tensor([[0.0, 4.0, 2.0]]))
    torch.testing.assert_close(dist.rsample(), dist.mode)
    assert dist.log_prob(dist.mode).item() == float("inf")
    assert dist.batch_shape == (1,) and dist.event_shape == (3,)


def test_truncated_normal_torchrl_signature():
    dist = TruncatedNormal(torch.zeros(4, 2), torch.ones(4, 2), low=-0.5, high=2.0)
    s = dist.sample((100,))
    assert ((s >= -0.5) & (s <= 2.0)).all()
    assert dist.log_prob(s).shape == (100, 4)
    torch.testing.assert_close(dist.mode, torch.zeros(4, 2))
    far = TruncatedNormal(torch.full((1,), 5.0), torch.ones(1), low=-1.0, high=1.0)
    torch.testing.assert_close(far.deterministic_sample, torch.ones(1))


# -- discrete -----------------------------------------------------------------------------
def test_categorical_and_one_hot_modes():
    logits = torch.tensor([[0.0, 2.0, 1.0]])
    assert Categorical(logits=logits).deterministic_sample.tolist() == [1]
    assert OneHotCategorical(logits=logits).mode.tolist() == [[0, 1, 0]]
    sample = OneHotCategorical(logits=logits).sample((5,))
    assert sample.shape == (5, 1, 3) and (sample.sum(-1) == 1).all()


def test_masked_categorical_never_samples_masked_actions():
    logits = torch.randn(64, 6)
    mask = torch.rand(64, 6) > 0.5
    mask[:, 0] = True  # at least one allowed action per row
    dist = MaskedCategorical(logits=logits, mask=mask)
    samples = dist.sample((500,))
    assert mask.gather(-1, samples.T).all()
    masked = (~mask).float().argmax(-1)
    has_masked = (~mask).any(-1)
    lp = dist.log_prob(masked)
    assert (lp[has_masked] == float("-inf")).all()
    assert lp[~has_masked].isfinite().all()
    assert mask.gather(-1, dist.deterministic_sample.unsqueeze(-1)).all()
    # the allowed actions keep their relative probabilities
    expected = torch.softmax(logits.masked_fill(~mask, float("-inf")), -1)
    torch.testing.assert_close(dist.probs, expected)


def test_masked_categorical_probs_indices_and_padding():
    probs = torch.full((2, 4), 0.25)
    dist = MaskedCategorical(
        probs=probs, mask=torch.tensor([[True, True, False, False], [False, False, False, True]])
    )
    torch.testing.assert_close(
        dist.probs, torch.tensor([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    )
    by_index = MaskedCategorical(
        logits=torch.zeros(2, 4), indices=torch.tensor([[0, 1], [3, -1]]), padding_value=-1
    )
    torch.testing.assert_close(by_index.probs, dist.probs)
    finite = MaskedCategorical(
        logits=torch.zeros(3), mask=torch.tensor([True, False, True]), neg_inf=-1e9
    )
    assert finite.log_prob(torch.tensor(1)).item() < -1e8


def test_masked_categorical_bad_input_raises():
    with pytest.raises(ValueError, match="exactly one of mask= and indices="):
        MaskedCategorical(logits=torch.zeros(3))
    with pytest.raises(TypeError, match="bool"):
        MaskedCategorical(logits=torch.zeros(3), mask=torch.ones(3))
    with pytest.raises(ValueError, match="mask has 2 actions"):
        MaskedCategorical(logits=torch.zeros(3), mask=torch.ones(2, dtype=torch.bool))


def test_masked_one_hot_categorical():
    dist = MaskedOneHotCategorical(
        logits=torch.zeros(10, 3), mask=torch.tensor([True, False, True])
    )
    s = dist.sample((50,))
    assert s.shape == (50, 10, 3) and (s[..., 1] == 0).all()
    assert dist.log_prob(torch.tensor([0, 1, 0])).eq(float("-inf")).all()
    assert dist.mode.shape == (10, 3)


def test_probabilistic_module_with_normal_params_extractor():
    from tensordict import TensorDict

    net = TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["obs"], ["loc", "scale"]
    )
    td = net(TensorDict({"obs": torch.randn(5, 3)}, [5]))
    sample = TanhNormal(td["loc"], td["scale"]).rsample()
    assert sample.shape == (5, 2)
