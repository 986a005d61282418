"""TorchRL's diffusion-policy pieces (DiffusionActor, DiffusionBCLoss) against DDPM's formulas."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import Bounded
from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
from torchrl_lite.modules import DiffusionActor
from torchrl_lite.objectives import DiffusionBCLoss


class _Affine(torch.nn.Module):
    """eps(x, s, t) = 0.5 x + s.sum + 0.1 t: simple enough to unroll by hand."""

    def forward(self, z):
        x, s, t = z[..., :2], z[..., 2:5], z[..., 5:]
        return 0.5 * x + s.sum(-1, keepdim=True) + 0.1 * t


def test_deterministic_reverse_chain_matches_ddpm_by_hand():
    actor = DiffusionActor(action_dim=2, score_network=_Affine(), num_steps=3,
                           beta_start=0.1, beta_end=0.3)  # fmt: skip
    obs = torch.randn(4, 3)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        out = actor(TensorDict(observation=obs, batch_size=[4]))["action"]
    betas = torch.tensor([0.1, 0.2, 0.3])
    abar = torch.cumprod(1 - betas, 0)
    x = torch.zeros(4, 2)
    for t in (2, 1, 0):  # Ho et al. 2020, algorithm 2 without the noise term
        eps = 0.5 * x + obs.sum(-1, keepdim=True) + 0.1 * t
        x = (x - betas[t] / torch.sqrt(1 - abar[t]) * eps) / torch.sqrt(1 - betas[t])
    torch.testing.assert_close(out, x)


def test_random_chain_samples_and_the_spec_bounds_clip():
    spec = Bounded(-1.0, 1.0, shape=(2,))
    actor = DiffusionActor(action_dim=2, score_network=_Affine(), num_steps=3, spec=spec)
    td = TensorDict(observation=torch.full((64, 3), 5.0), batch_size=[64])
    with set_exploration_type(ExplorationType.RANDOM):
        a, b = actor(td.clone())["action"], actor(td.clone())["action"]
    assert not torch.equal(a, b)
    assert bool((a.abs() <= 1.0).all())


def test_diffusion_bc_loss_is_the_noise_regression():
    torch.manual_seed(0)
    actor = DiffusionActor(action_dim=2, obs_dim=3, num_steps=10)
    loss = DiffusionBCLoss(actor)
    batch = TensorDict(observation=torch.randn(16, 3), action=torch.rand(16, 2), batch_size=[16])
    torch.manual_seed(7)
    value = loss(batch)["loss_diffusion_bc"]
    torch.manual_seed(7)  # the same draws of t and eps, then eq. 14 of Ho et al. by hand
    t = torch.randint(10, (16,))
    eps = torch.randn(16, 2)
    abar = torch.cumprod(1 - torch.linspace(1e-4, 0.02, 10), 0)[t].unsqueeze(-1)
    x_t = abar.sqrt() * batch["action"] + (1 - abar).sqrt() * eps
    net = actor.module.score_network
    expected = (
        (net(torch.cat([x_t, batch["observation"], t.float().unsqueeze(-1)], -1)) - eps) ** 2
    ).mean()
    torch.testing.assert_close(value, expected)
    value.backward()
    assert all(p.grad is not None for p in net.parameters())
    trained = [p for p in loss.actor_network_params.flatten_keys().values() if p.requires_grad]
    assert len(trained) == 6  # the score network's; the schedule is fixed


def test_diffusion_pieces_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_steps must be a positive int, got 0"):
        DiffusionActor(action_dim=2, obs_dim=3, num_steps=0)
    with pytest.raises(ValueError, match="beta_start <= beta_end"):
        DiffusionActor(action_dim=2, obs_dim=3, beta_start=0.5, beta_end=0.1)
    with pytest.raises(TypeError, match="must be a DiffusionActor"):
        DiffusionBCLoss(torch.nn.Linear(2, 2))
    loss = DiffusionBCLoss(DiffusionActor(action_dim=2, obs_dim=3, num_steps=2))
    with pytest.raises(KeyError, match="Key 'action' not found"):
        loss(TensorDict(observation=torch.randn(2, 3), batch_size=[2]))
