"""RNDLoss: trains random network distillation's predictor (Burda et al. 2018,
https://arxiv.org/abs/1810.12894) to match the frozen target on visited observations::

    loss_predictor = mean over the kept samples of mean_k (f_pred(o)_k - f_target(o)_k)^2

where a random ``update_fraction`` of the batch is kept (the paper's way to keep the
predictor from learning too fast when many envs collect).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.objectives.common import LossModule

__all__ = ["RNDLoss"]


@dataclass
class _RNDKeys:
    """Keys of ``RNDLoss``: the (next) observation read, ``("next", "observation")``."""

    observation: str | tuple = (K.NEXT, K.OBSERVATION)


class RNDLoss(LossModule):
    """The predictor's regression loss onto the frozen random target.

    Args:
        predictor_network: the trained network (``nn.Module`` on observations).
        target_network: the frozen random network (its parameters stop requiring grad).
        obs_rms: a ``RunningMeanStd`` to normalize observations with (None: as they are).
        obs_clip: clip of the normalized observations.
        reduction: ``"mean"`` (over kept samples), ``"sum"`` or ``"none"``.
        update_fraction: the fraction of samples kept, in [0, 1].

    Example:
        >>> loss = RNDLoss(torch.nn.Linear(4, 8), torch.nn.Linear(4, 8), update_fraction=1.0)
        >>> out = loss(TensorDict({"next": {"observation": torch.randn(6, 4)}}, [6]))
        >>> out["loss_predictor"].shape
        torch.Size([])
    """

    _AcceptedKeys = _RNDKeys

    def __init__(
        self,
        predictor_network: nn.Module,
        target_network: nn.Module,
        *,
        obs_rms=None,
        obs_clip: float = 5.0,
        reduction: str = "mean",
        update_fraction: float = 0.25,
    ):
        super().__init__()
        if not 0.0 <= update_fraction <= 1.0:
            raise ValueError(f"RNDLoss: update_fraction must lie in [0, 1], got {update_fraction}.")
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"RNDLoss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}."
            )
        self.predictor_network = predictor_network
        self.target_network = target_network.requires_grad_(False)
        self.obs_rms, self.obs_clip = obs_rms, float(obs_clip)
        self.reduction, self.update_fraction = reduction, float(update_fraction)

    @property
    def in_keys(self) -> list:
        return [self.tensor_keys.observation]

    @property
    def out_keys(self) -> list:
        return ["loss_predictor"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        obs = self._get(tensordict, "observation").float()
        if self.obs_rms is not None:
            obs = self.obs_rms.normalize(obs).clamp(-self.obs_clip, self.obs_clip)
        with torch.no_grad():
            target = self.target_network(obs)
        per_sample = (self.predictor_network(obs) - target).pow(2).mean(-1)  # [*B]
        keep = torch.ones_like(per_sample)
        if self.update_fraction < 1.0:
            keep = (torch.rand_like(per_sample) < self.update_fraction).to(per_sample.dtype)
        per_sample = per_sample * keep
        if self.reduction == "mean":
            loss = per_sample.sum() / keep.sum().clamp_min(1.0)
        elif self.reduction == "sum":
            loss = per_sample.sum()
        else:
            return TensorDict({"loss_predictor": per_sample}, batch_size=per_sample.shape)
        return TensorDict({"loss_predictor": loss}, batch_size=[])
