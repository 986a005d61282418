"""Tiny networks and batches shared by the loss tests (not a test module)."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.modules import (
    OneHotCategorical,
    ProbabilisticActor,
    QValueActor,
    SafeModule,
    TanhNormal,
    ValueOperator,
)

OBS, ACT = 3, 2


def gaussian_actor(dist=torch.distributions.Normal, obs=OBS, act=ACT):
    """A ``ProbabilisticActor``: Linear -> (loc, scale) -> ``dist``; returns (actor, net)."""
    net = nn.Sequential(nn.Linear(obs, 2 * act), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    actor = ProbabilisticActor(
        module, in_keys=["loc", "scale"], distribution_class=dist, return_log_prob=True
    )
    return actor, net


def tanh_actor(obs=OBS, act=ACT):
    return gaussian_actor(TanhNormal, obs, act)


def categorical_actor(obs=OBS, n=3):
    """A one-hot categorical actor; returns (actor, linear)."""
    net = nn.Linear(obs, n)
    module = SafeModule(net, in_keys=["observation"], out_keys=["logits"])
    actor = ProbabilisticActor(
        module, in_keys=["logits"], distribution_class=OneHotCategorical, return_log_prob=True
    )
    return actor, net


def critic(obs=OBS):
    net = nn.Linear(obs, 1)
    return ValueOperator(net, in_keys=["observation"]), net


def qvalue_actor(obs=4, n=3, action_space="one_hot"):
    net = nn.Sequential(nn.Linear(obs, 16), nn.Tanh(), nn.Linear(16, n))
    return QValueActor(net, action_space=action_space), net


def transitions(batch=(6,), obs=OBS, *, done_every=None, generator_seed=0):
    """A batch of transitions with ``("next", reward/done/terminated/observation)``."""
    g = torch.Generator().manual_seed(generator_seed)
    shape = tuple(batch)
    done = torch.zeros(*shape, 1, dtype=torch.bool)
    terminated = torch.zeros(*shape, 1, dtype=torch.bool)
    if done_every:
        done[..., done_every - 1 :: done_every, :] = True
        terminated[..., done_every - 1 :: 2 * done_every, :] = True
    return TensorDict(
        observation=torch.randn(*shape, obs, generator=g),
        next=TensorDict(
            observation=torch.randn(*shape, obs, generator=g),
            reward=torch.randn(*shape, 1, generator=g),
            done=done,
            terminated=terminated,
            batch_size=shape,
        ),
        batch_size=shape,
    )


def grads(loss: torch.Tensor, params) -> list:
    """Gradients of ``loss`` w.r.t. ``params`` (None where it does not depend on them)."""
    params = list(params)
    return list(torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True))


def assert_grads_close(got, expected, atol=1e-5):
    for g, e in zip(got, expected, strict=True):
        assert (g is None) == (e is None)
        if g is not None:
            torch.testing.assert_close(g, e, atol=atol, rtol=1e-4)
