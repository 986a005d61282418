"""Functional value estimators against plain references written here (forward views)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from torchrl_lite.objectives.value.functional import (
    generalized_advantage_estimate,
    reward2go,
    td0_advantage_estimate,
    td0_return_estimate,
    td1_return_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_return_estimate,
)


# -- references: forward views over one trajectory row, in float64 numpy -----------------
def _episode_end(done: np.ndarray, t: int) -> int:
    """Index of the last step of the episode containing step t (or of the batch)."""
    e = t
    while e < len(done) - 1 and not done[e]:
        e += 1
    return e


def _discounts(g: np.ndarray, t: int, e: int) -> np.ndarray:
    """disc[k - t] = prod(g[t:k]) for k in t .. e + 1."""
    return np.concatenate([[1.0], np.cumprod(g[t : e + 1])])


def ref_row(kind, r, v, nv, done, term, g, lam):
    """One row (length T) of estimator ``kind``, from its definition."""
    T = len(r)
    out = np.zeros(T)
    for t in range(T):
        if kind == "td0":
            out[t] = r[t] + g[t] * (1 - term[t]) * nv[t]
            continue
        e = _episode_end(done, t)
        disc = _discounts(g, t, e)
        if kind == "reward2go":
            out[t] = sum(disc[k - t] * r[k] for k in range(t, e + 1))
        elif kind == "td1":
            out[t] = sum(disc[k - t] * r[k] for k in range(t, e + 1))
            out[t] += disc[e + 1 - t] * (1 - term[e]) * nv[e]
        elif kind == "gae":
            w = _discounts(g * lam, t, e)
            deltas = [r[k] + g[k] * (1 - term[k]) * nv[k] - v[k] for k in range(t, e + 1)]
            out[t] = sum(w[k - t] * deltas[k - t] for k in range(t, e + 1))
        elif kind == "td_lambda":
            n_max = e - t + 1
            total = 0.0
            for n in range(1, n_max + 1):  # n-step returns mixed with lambda weights
                last = t + n - 1
                g_n = sum(disc[k - t] * r[k] for k in range(t, last + 1))
                g_n += disc[n] * (1 - term[last]) * nv[last]
                weight = np.prod(lam[t:last])
                if n < n_max:
                    weight *= 1 - lam[last]
                total += weight * g_n
            out[t] = total
    return out


def reference(kind, r, v, nv, done, term, gamma, lmbda=1.0):
    """Apply ``ref_row`` to every row of ``[*B, T, 1]`` tensors; returns float64."""
    shape = r.shape
    g = torch.as_tensor(gamma, dtype=torch.float64).expand(shape).reshape(-1, shape[-2])
    lam = torch.as_tensor(lmbda, dtype=torch.float64).expand(shape).reshape(-1, shape[-2])
    rows = [x.double().reshape(-1, shape[-2]).numpy() for x in (r, v, nv)]
    flags = [x.reshape(-1, shape[-2]).numpy() for x in (done, term)]
    out = [
        ref_row(
            kind,
            rows[0][i],
            rows[1][i],
            rows[2][i],
            flags[0][i],
            flags[1][i],
            g[i].numpy(),
            lam[i].numpy(),
        )
        for i in range(rows[0].shape[0])
    ]
    return torch.as_tensor(np.stack(out)).reshape(shape)


# -- data ---------------------------------------------------------------------------------
def make_batch(batch, T, seed=0, p_end=0.15):
    """Random values/rewards with terminations and truncations in mid-trajectory."""
    g = torch.Generator().manual_seed(seed)
    shape = (*batch, T, 1)
    r, v, nv = (torch.randn(shape, generator=g) for _ in range(3))
    u = torch.rand(shape, generator=g)
    term = u < p_end
    trunc = (u >= p_end) & (u < 2 * p_end)
    if T > 4:  # at least one of each, away from the ends
        term[..., 1, :] = True
        trunc[..., 1, :] = False
        trunc[..., T - 3, :] = True
        term[..., T - 3, :] = False
    return r, v, nv, term | trunc, term


def call(kind, vec, gamma, lmbda, r, v, nv, done, term):
    """Run the library function of ``kind`` (vec or loop version)."""
    if kind == "td0":
        return td0_return_estimate(gamma, nv, r, term)
    if kind == "td1":
        return (vec_td1_return_estimate if vec else td1_return_estimate)(gamma, nv, r, done, term)
    if kind == "td_lambda":
        fn = vec_td_lambda_return_estimate if vec else td_lambda_return_estimate
        return fn(gamma, lmbda, nv, r, done, term)
    if kind == "gae":
        fn = vec_generalized_advantage_estimate if vec else generalized_advantage_estimate
        return fn(gamma, lmbda, v, nv, r, done, term)[0]
    if kind == "reward2go":
        return reward2go(r, done, gamma)
    raise AssertionError(kind)


KINDS = ["td0", "td1", "td_lambda", "gae", "reward2go"]
SHAPES = [(), (3,), (2, 3)]


def _close(actual, expected, rtol=1e-5):
    scale = expected.abs().max().clamp_min(1.0)
    err = ((actual.double() - expected).abs().max() / scale).item()
    assert err < rtol, f"max relative error {err:.2e}"


# -- matches the references ---------------------------------------------------------------
@pytest.mark.parametrize("batch", SHAPES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("vec", [True, False], ids=["vec", "loop"])
def test_functional_matches_reference_scalar_factors(kind, vec, batch):
    r, v, nv, done, term = make_batch(batch, T=17)
    out = call(kind, vec, 0.9, 0.8, r, v, nv, done, term)
    assert out.shape == r.shape and out.dtype == r.dtype
    _close(
        out,
        reference(kind, r, v, nv, done, term, 0.9, 0.8 if kind in ("gae", "td_lambda") else 1.0),
    )


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("vec", [True, False], ids=["vec", "loop"])
def test_functional_matches_reference_per_step_factors(kind, vec):
    r, v, nv, done, term = make_batch((2, 3), T=13, seed=1)
    gamma = 0.5 + 0.5 * torch.rand(r.shape)  # [B1, B2, T, 1], in (0.5, 1]
    lmbda = torch.rand(13, 1)  # [T, 1], broadcast over the batch
    out = call(kind, vec, gamma, lmbda, r, v, nv, done, term)
    lam = lmbda if kind in ("gae", "td_lambda") else 1.0
    _close(out, reference(kind, r, v, nv, done, term, gamma, lam))


@pytest.mark.parametrize("gamma,lmbda", [(1.0, 0.0), (1.0, 1.0), (0.3, 0.0), (0.99, 1.0)])
@pytest.mark.parametrize("kind", ["td_lambda", "gae"])
def test_functional_matches_reference_edge_factors(kind, gamma, lmbda):
    r, v, nv, done, term = make_batch((3,), T=11, seed=2)
    expected = reference(kind, r, v, nv, done, term, gamma, lmbda)
    for vec in (True, False):
        _close(call(kind, vec, gamma, lmbda, r, v, nv, done, term), expected)


def test_td_lambda_edge_cases_reduce_to_td0_and_td1():
    r, v, nv, done, term = make_batch((4,), T=20, seed=3)
    td0 = td0_return_estimate(0.9, nv, r, term)
    td1 = vec_td1_return_estimate(0.9, nv, r, done, term)
    torch.testing.assert_close(vec_td_lambda_return_estimate(0.9, 0.0, nv, r, done, term), td0)
    torch.testing.assert_close(vec_td_lambda_return_estimate(0.9, 1.0, nv, r, done, term), td1)


def test_gae_target_is_td_lambda_return_when_values_are_consistent():
    r, v, nv, done, term = make_batch((3,), T=30, seed=4)
    # consistent values: inside an episode V(s'[t]) == V(s[t + 1])
    v[..., 1:, :] = torch.where(done[..., :-1, :], v[..., 1:, :], nv[..., :-1, :])
    adv, target = vec_generalized_advantage_estimate(0.95, 0.9, v, nv, r, done, term)
    torch.testing.assert_close(target, adv + v)
    ret = vec_td_lambda_return_estimate(0.95, 0.9, nv, r, done, term)
    torch.testing.assert_close(target, ret, rtol=1e-5, atol=1e-5)


def test_td0_advantage_and_default_terminated():
    r, v, nv, done, term = make_batch((3,), T=9, seed=5)
    expected = reference("td0", r, v, nv, done, term, 0.9) - v.double()
    _close(td0_advantage_estimate(0.9, v, nv, r, term), expected)
    # without terminated, done is used (every end is a termination)
    torch.testing.assert_close(
        td0_return_estimate(0.9, nv, r, done=done), td0_return_estimate(0.9, nv, r, done)
    )
    for vec in (True, False):
        torch.testing.assert_close(
            call("td_lambda", vec, 0.9, 0.7, r, v, nv, done, None),
            call("td_lambda", vec, 0.9, 0.7, r, v, nv, done, done),
        )


def test_gae_returns_advantage_and_target():
    r, v, nv, done, term = make_batch((2,), T=12, seed=6)
    for fn in (vec_generalized_advantage_estimate, generalized_advantage_estimate):
        adv, target = fn(0.9, 0.8, v, nv, r, done, term)
        torch.testing.assert_close(target, adv + v)


# -- vec vs loop on long trajectories -----------------------------------------------------
@pytest.mark.parametrize("p_end", [0.0, 0.01], ids=["one-episode", "with-ends"])
def test_vec_matches_loop_long_trajectories(p_end):
    r, v, nv, done, term = make_batch((4,), T=1000, seed=7, p_end=p_end)
    gamma, lmbda = 0.99, 0.95  # gamma * lmbda ~ 0.94
    pairs = [
        (
            vec_generalized_advantage_estimate,
            generalized_advantage_estimate,
            (v, nv, r, done, term),
        ),
        (vec_td_lambda_return_estimate, td_lambda_return_estimate, (nv, r, done, term)),
    ]
    for vec_fn, loop_fn, args in pairs:
        a, b = vec_fn(gamma, lmbda, *args), loop_fn(gamma, lmbda, *args)
        a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
        exact = loop_fn(gamma, lmbda, *(x.double() if x.is_floating_point() else x for x in args))
        exact = exact[0] if isinstance(exact, tuple) else exact
        _close(a, b.double())
        _close(a, exact)
    a = vec_td1_return_estimate(gamma, nv, r, done, term)
    _close(a, td1_return_estimate(gamma, nv, r, done, term).double())


def test_vec_gradients():
    r, v, nv, done, term = make_batch((2,), T=9, seed=8)
    v, nv = v.double().requires_grad_(), nv.double().requires_grad_()
    r = r.double()
    torch.autograd.gradcheck(
        lambda v, nv: vec_generalized_advantage_estimate(0.9, 0.8, v, nv, r, done, term)[0], (v, nv)
    )
    torch.autograd.gradcheck(
        lambda nv: vec_td_lambda_return_estimate(0.9, 0.8, nv, r, done, term), (nv,)
    )


# -- episode boundaries -------------------------------------------------------------------
def test_truncation_bootstraps_from_final_observation_termination_does_not():
    # step 1 is truncated, step 3 is terminated; the reset states have value -50
    r = torch.ones(5, 1)
    v = torch.tensor([[0.0], [0.0], [-50.0], [0.0], [0.0]])
    nv = torch.tensor([[0.0], [100.0], [0.0], [7.0], [0.0]])  # nv[1]: true final obs
    trunc = torch.tensor([[False], [True], [False], [False], [False]])
    term = torch.tensor([[False], [False], [False], [True], [False]])
    done = trunc | term
    g = 0.5
    for vec in (True, False):
        for lmbda in (0.0, 0.5, 1.0):
            ret = call("td_lambda", vec, g, lmbda, r, v, nv, done, term)
            assert ret[1].item() == pytest.approx(1 + g * 100)  # bootstraps from 100, not -50
            assert ret[3].item() == pytest.approx(1.0)  # terminated: no bootstrap from 7
            adv = call("gae", vec, g, lmbda, r, v, nv, done, term)
            assert adv[1].item() == pytest.approx(1 + g * 100 - v[1].item())
            assert adv[3].item() == pytest.approx(1 - v[3].item())
        td1 = call("td1", vec, g, 1.0, r, v, nv, done, term)
        assert td1[0].item() == pytest.approx(1 + g * (1 + g * 100))
    assert td0_return_estimate(g, nv, r, term)[1].item() == pytest.approx(1 + g * 100)
    assert td0_return_estimate(g, nv, r, term)[3].item() == pytest.approx(1.0)
    assert reward2go(r, done, g)[0].item() == pytest.approx(1 + g)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=5),
    ends=st.lists(st.sampled_from(["terminated", "truncated"]), min_size=5, max_size=5),
    last_cut=st.booleans(),
    gamma=st.floats(0.3, 1.0),
    lmbda=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
def test_concatenated_trajectories_equal_each_alone(lengths, ends, last_cut, gamma, lmbda, seed):
    """Estimating over trajectories laid end to end in time equals estimating each alone."""
    g = torch.Generator().manual_seed(seed)
    trajs = []
    for i, n in enumerate(lengths):
        r, v, nv = (torch.randn(n, 1, generator=g) for _ in range(3))
        term = torch.zeros(n, 1, dtype=torch.bool)
        done = torch.zeros(n, 1, dtype=torch.bool)
        if not (last_cut and i == len(lengths) - 1):  # the batch may cut the last one
            done[-1] = True
            term[-1] = ends[i] == "terminated"
        trajs.append((r, v, nv, done, term))
    cat = [torch.cat(parts) for parts in zip(*trajs)]
    bounds = np.cumsum([0, *lengths])
    for kind in KINDS:
        for vec in (True, False):
            whole = call(kind, vec, gamma, lmbda, *cat)
            for i, traj in enumerate(trajs):
                alone = call(kind, vec, gamma, lmbda, *traj)
                torch.testing.assert_close(
                    whole[bounds[i] : bounds[i + 1]], alone, rtol=1e-5, atol=1e-5
                )
        # and the truncated step bootstraps from its own "next" value
        r, v, nv, done, term = cat
        if kind in ("td_lambda", "gae", "td1"):
            ret = call(kind, True, gamma, lmbda, *cat)
            ends_idx = (done & ~term).squeeze(-1).nonzero().squeeze(-1)
            for t in ends_idx.tolist():
                expected = r[t] + gamma * nv[t] - (v[t] if kind == "gae" else 0)
                torch.testing.assert_close(ret[t], expected, rtol=1e-5, atol=1e-5)


# -- bad input ----------------------------------------------------------------------------
def _all_calls(r, v, nv, done, term, gamma=0.9, lmbda=0.9):
    return {
        "td0_return_estimate": lambda: td0_return_estimate(gamma, nv, r, term),
        "td0_advantage_estimate": lambda: td0_advantage_estimate(gamma, v, nv, r, term),
        "td1_return_estimate": lambda: td1_return_estimate(gamma, nv, r, done, term),
        "vec_td1_return_estimate": lambda: vec_td1_return_estimate(gamma, nv, r, done, term),
        "td_lambda_return_estimate": lambda: td_lambda_return_estimate(
            gamma, lmbda, nv, r, done, term
        ),
        "vec_td_lambda_return_estimate": lambda: vec_td_lambda_return_estimate(
            gamma, lmbda, nv, r, done, term
        ),
        "generalized_advantage_estimate": lambda: generalized_advantage_estimate(
            gamma, lmbda, v, nv, r, done, term
        ),
        "vec_generalized_advantage_estimate": lambda: vec_generalized_advantage_estimate(
            gamma, lmbda, v, nv, r, done, term
        ),
        "reward2go": lambda: reward2go(r, done, gamma),
    }


NAMES = list(_all_calls(*make_batch((2,), 5)))


@pytest.mark.parametrize("name", NAMES)
def test_functional_rejects_missing_singleton_dim(name):
    r, v, nv, done, term = make_batch((2,), 5)
    r, done = r.squeeze(-1), done.squeeze(-1)  # [B, T]
    with pytest.raises(ValueError, match=r"must be shaped \[\*batch, T, 1\].*\[2, 5\]"):
        _all_calls(r, v, nv, done, term)[name]()


@pytest.mark.parametrize("name", NAMES)
def test_functional_rejects_time_dims_that_disagree(name):
    r, v, nv, done, term = make_batch((2,), 6)
    r = r[..., :5, :]
    with pytest.raises(ValueError, match=r"time dims disagree: \w+ has T=[56].*\w+ has T=[56]"):
        _all_calls(r, v, nv, done, term)[name]()


@pytest.mark.parametrize("name", NAMES)
def test_functional_rejects_batch_dims_that_disagree(name):
    r, v, nv, done, term = make_batch((2,), 6)
    r = r[:1]
    with pytest.raises(ValueError, match=r"same \[\*batch, T, 1\] shape"):
        _all_calls(r, v, nv, done, term)[name]()


@pytest.mark.parametrize("gamma", [0.0, -0.1, 1.5, torch.tensor([[0.5], [0.0], [0.9]])])
@pytest.mark.parametrize("name", NAMES)
def test_functional_rejects_gamma_out_of_range(name, gamma):
    batch = make_batch((2,), 3)
    with pytest.raises(ValueError, match=r"gamma must lie in \(0, 1\]"):
        _all_calls(*batch, gamma=gamma)[name]()


@pytest.mark.parametrize("lmbda", [-0.1, 1.01, torch.tensor([[0.5], [1.2], [0.9]])])
@pytest.mark.parametrize(
    "name", [n for n in NAMES if "lambda" in n or "advantage_estimate" in n and "td0" not in n]
)
def test_functional_rejects_lmbda_out_of_range(name, lmbda):
    batch = make_batch((2,), 3)
    with pytest.raises(ValueError, match=r"lmbda must lie in \[0, 1\]"):
        _all_calls(*batch, lmbda=lmbda)[name]()


@pytest.mark.parametrize("name", NAMES)
def test_functional_rejects_bad_gamma_types_and_shapes(name):
    batch = make_batch((2,), 3)
    with pytest.raises(TypeError, match="gamma must be a number or a tensor"):
        _all_calls(*batch, gamma="0.9")[name]()
    with pytest.raises(ValueError, match=r"gamma of shape \[4, 1\] does not broadcast"):
        _all_calls(*batch, gamma=torch.full((4, 1), 0.9))[name]()


def test_functional_rejects_non_tensor_input():
    r, v, nv, done, term = make_batch((2,), 3)
    with pytest.raises(TypeError, match="reward must be a torch.Tensor"):
        vec_generalized_advantage_estimate(0.9, 0.9, v, nv, r.tolist(), done, term)
