"""Small networks, batches and hand-written formulas shared by the off-policy loss tests.

The stochastic actors use ``FixedNoiseTanhNormal``: a ``TanhNormal`` whose reparameterised
sample uses a fixed, known noise ``eps(shape)`` instead of random draws, so a test can
recompute the sampled actions (and their log-probabilities) by hand.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.data.tensor_specs import Bounded
from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator

OBS, ACT = 3, 2


def eps(shape) -> torch.Tensor:
    """The fixed noise of ``FixedNoiseTanhNormal``: distinct values in [-1, 1]."""
    n = math.prod(shape)
    return torch.sin(torch.arange(n, dtype=torch.float32) * 1.3 + 0.4).reshape(shape)


class FixedNoiseTanhNormal(TanhNormal):
    """``TanhNormal`` whose ``rsample`` is ``tanh(loc + scale * eps(shape))``."""

    def rsample(self, sample_shape=()):
        shape = self._extended_shape(torch.Size(sample_shape))
        return self._squash(self.loc + self.scale * eps(shape))


def tanh_normal_sample(loc, scale, sample_shape=()):
    """``(a, log p(a))`` of ``FixedNoiseTanhNormal`` written out: ``a = tanh(x)``,
    ``log p = sum_A [log N(x; loc, scale) - log(1 - tanh(x)^2)]``."""
    shape = (*sample_shape, *loc.shape)
    x = loc + scale * eps(shape)
    log_normal = -0.5 * ((x - loc) / scale) ** 2 - scale.log() - 0.5 * math.log(2 * math.pi)
    log_prob = (log_normal - torch.log(1 - torch.tanh(x) ** 2)).sum(-1)
    return torch.tanh(x), log_prob


def make_actor(dist=FixedNoiseTanhNormal, obs_dim=OBS, act_dim=ACT):
    """``(actor, net)``: a ProbabilisticActor and its ``obs -> (loc, scale)`` network."""
    net = nn.Sequential(nn.Linear(obs_dim, 2 * act_dim), NormalParamExtractor())
    module = TensorDictModule(net, ["observation"], ["loc", "scale"])
    actor = ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        distribution_class=dist,
        spec=Bounded(-1.0, 1.0, shape=(act_dim,)),
    )
    return actor, net


def make_qvalue(obs_dim=OBS, act_dim=ACT):
    return ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=8, depth=1), in_keys=["observation", "action"]
    )


def make_value(obs_dim=OBS):
    return ValueOperator(MLP(obs_dim, 1, num_cells=8, depth=1), in_keys=["observation"])


def mlp_by_hand(p, *inputs) -> torch.Tensor:
    """The one-hidden-layer tanh MLP of ``make_qvalue``/``make_value`` from its parameters
    ``p`` (a TensorDict), squeezed to ``[*B]``."""
    x = torch.cat(inputs, -1)
    h = torch.tanh(x @ p["module", "0", "weight"].T + p["module", "0", "bias"])
    return (h @ p["module", "2", "weight"].T + p["module", "2", "bias"]).squeeze(-1)


def make_batch(n=6, obs_dim=OBS, act_dim=ACT, action=None) -> TensorDict:
    """A transition batch ``[n]``; the 2nd sample is terminated, the 4th truncated."""
    terminated = torch.zeros(n, 1, dtype=torch.bool)
    truncated = torch.zeros(n, 1, dtype=torch.bool)
    terminated[1] = True
    truncated[3] = True
    if action is None:
        action = torch.rand(n, act_dim) * 1.8 - 0.9
    return TensorDict(
        observation=torch.randn(n, obs_dim),
        action=action,
        next=TensorDict(
            observation=torch.randn(n, obs_dim),
            reward=torch.randn(n, 1),
            done=terminated | truncated,
            terminated=terminated,
            truncated=truncated,
            batch_size=[n],
        ),
        batch_size=[n],
    )


def perturb(module: nn.Module, scale: float = 0.1) -> None:
    """Add noise to every floating buffer of a target network (so it differs from the online one)."""
    with torch.no_grad():
        for buffer in module.buffers():
            if buffer.is_floating_point():
                buffer.add_(scale * torch.randn_like(buffer))


def grads(loss: torch.Tensor, params) -> list:
    """``d loss / d params``; zeros where ``loss`` does not depend on a parameter."""
    params = list(params)
    out = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
    return [torch.zeros_like(p) if g is None else g for p, g in zip(params, out)]


def assert_grads_close(a: list, b: list, atol=1e-5) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, atol=atol, rtol=1e-4)


def assert_no_grad(loss: torch.Tensor, params) -> None:
    """``loss`` does not move any of ``params``."""
    for g in grads(loss, params):
        assert torch.count_nonzero(g) == 0


def loss_terms(out: TensorDict) -> list:
    return sorted(k for k in out.keys() if k.startswith("loss_"))


def total(out: TensorDict) -> torch.Tensor:
    return sum(v for k, v in out.items() if k.startswith("loss_"))


def target_ids(loss: nn.Module) -> set:
    """Ids of every tensor held by the loss's target networks."""
    ids = set()
    for name, module in loss.named_children():
        if name.startswith("target_"):
            ids |= {id(t) for t in module.parameters()} | {id(t) for t in module.buffers()}
    return ids


def bandit_batch(n=64, obs_dim=OBS, act_dim=ACT) -> TensorDict:
    """A one-step problem (one observation, every step terminates): reward -|a - 0.5|^2."""
    batch = make_batch(n, obs_dim, act_dim)
    batch["observation"] = torch.zeros(n, obs_dim)
    batch["action"] = torch.rand(n, act_dim) * 2 - 1
    batch["next", "reward"] = -((batch["action"] - 0.5) ** 2).sum(-1, keepdim=True)
    batch["next", "terminated"] = torch.ones(n, 1, dtype=torch.bool)
    batch["next", "done"] = torch.ones(n, 1, dtype=torch.bool)
    return batch


def bandit_reward(action: torch.Tensor) -> float:
    return -((action - 0.5) ** 2).sum(-1).mean().item()


def train(loss, batch, steps=200, lr=1e-2, tau=0.05) -> tuple:
    """``steps`` Adam updates of the summed ``loss_*`` terms (soft target updates if the
    loss has targets); returns the outputs before and after."""
    from torchrl_lite.objectives import SoftUpdate

    optim = torch.optim.Adam(loss.parameters(), lr=lr)
    updater = SoftUpdate(loss, tau=tau) if loss._target_pairs else None
    first = loss(batch.clone())
    for _ in range(steps):
        out = loss(batch.clone())
        optim.zero_grad()
        total(out).backward()
        optim.step()
        if updater is not None:
            updater.step()
    return first, loss(batch.clone())


def big_qvalue(obs_dim=OBS, act_dim=ACT):
    """A Q-network wide enough to fit the bandit's reward in a few hundred steps."""
    return ValueOperator(
        MLP(obs_dim + act_dim, 1, num_cells=32, depth=2), in_keys=["observation", "action"]
    )


def params_of(module: nn.Module, buffers: bool = False) -> TensorDict:
    """A module's parameters (or buffers, for a target copy) as a nested TensorDict."""
    named = module.named_buffers() if buffers else module.named_parameters()
    return TensorDict({tuple(k.split(".")): v for k, v in named})
