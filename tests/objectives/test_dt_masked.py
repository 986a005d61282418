"""DTLoss and OnlineDTLoss on left-padded windows: the means run over the real steps only."""

import math

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.modules import Actor, IndependentNormal, ProbabilisticActor
from torchrl_lite.objectives import DTLoss, OnlineDTLoss


def _windows(b=4, t=5):
    mask = torch.ones(b, t, dtype=torch.bool)
    mask[0, :3] = False  # an episode start: three padded steps
    mask[2, :1] = False
    return TensorDict(
        observation=torch.randn(b, t, 3), action=torch.rand(b, t, 2) * 1.8 - 0.9, mask=mask,
        batch_size=[b, t],
    )  # fmt: skip


def test_dt_loss_ignores_padded_steps():
    net = nn.Linear(3, 2)
    batch = _windows()
    out = DTLoss(Actor(net))(batch)
    sq = ((net(batch["observation"]) - batch["action"]) ** 2).mean(-1)  # [B, T]
    m = batch["mask"].float()
    torch.testing.assert_close(out["loss"], (sq * m).sum() / m.sum())
    # padded steps' actions do not change the loss
    batch["action"][~batch["mask"]] = 100.0
    torch.testing.assert_close(DTLoss(Actor(net))(batch)["loss"], out["loss"])


def test_online_dt_loss_ignores_padded_steps():
    net = nn.Sequential(nn.Linear(3, 4), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"], distribution_class=IndependentNormal,
    )  # fmt: skip
    batch = _windows()
    out = OnlineDTLoss(actor, alpha_init=0.2)(batch)
    loc, scale = net(batch["observation"])
    x = batch["action"]
    log_prob = (-0.5 * ((x - loc) / scale) ** 2 - scale.log() - 0.5 * math.log(2 * math.pi)).sum(-1)
    entropy = (0.5 + 0.5 * math.log(2 * math.pi) + scale.log()).sum(-1)
    m = batch["mask"].float()
    torch.testing.assert_close(out["loss_log_likelihood"], -(log_prob * m).sum() / m.sum())
    torch.testing.assert_close(out["entropy"], ((entropy * m).sum() / m.sum()).detach())
