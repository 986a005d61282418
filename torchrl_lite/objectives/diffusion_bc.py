"""Behaviour cloning of a diffusion policy: ``DiffusionBCLoss``.

Paper: Chi et al. 2023, "Diffusion Policy", https://arxiv.org/abs/2303.04137 (the
noise-prediction loss of Ho et al. 2020, https://arxiv.org/abs/2006.11239).

For a batch ``[*B]`` of (observation ``s``, dataset action ``a``): draw a step
``t ~ U{0, .., N - 1}`` and noise ``eps ~ N(0, I)`` per item, noise the action to
``x_t = sqrt(abar_t) a + sqrt(1 - abar_t) eps`` and regress the score network on the
noise: ``loss_diffusion_bc = mean((eps(x_t, s, t) - eps)^2)``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.objectives.common import LossModule

__all__ = ["DiffusionBCLoss"]


class DiffusionBCLoss(LossModule):
    """The denoising (noise-prediction) loss of a :class:`~torchrl_lite.modules.DiffusionActor`.

    Args:
        actor_network: a ``DiffusionActor`` (its ``module`` noises actions and predicts
            noise).
        reduction: ``"mean"`` (default), ``"sum"`` or ``"none"`` (per item and action dim).

    Example:
        >>> from torchrl_lite.modules import DiffusionActor
        >>> loss = DiffusionBCLoss(DiffusionActor(action_dim=2, obs_dim=3, num_steps=5))
        >>> batch = TensorDict(observation=torch.randn(8, 3), action=torch.randn(8, 2),
        ...     batch_size=[8])
        >>> loss(batch)["loss_diffusion_bc"].shape
        torch.Size([])
    """

    def __init__(self, actor_network, *, reduction: str = "mean"):
        super().__init__()
        if not hasattr(getattr(actor_network, "module", None), "add_noise"):
            raise TypeError(
                "DiffusionBCLoss: actor_network must be a DiffusionActor (its module noises "
                f"actions), got {type(actor_network).__name__}."
            )
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(
                f"DiffusionBCLoss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}."
            )
        self.reduction = reduction
        self.register_network("actor_network", actor_network)

    @property
    def in_keys(self) -> list:
        return [*self.actor_network.in_keys, K.ACTION]

    @property
    def out_keys(self) -> list:
        return ["loss_diffusion_bc"]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        ddpm = self.actor_network.module
        observation = tensordict.get(self.actor_network.in_keys[0])
        action = tensordict.get(K.ACTION, None)
        if action is None:
            raise KeyError(
                "DiffusionBCLoss: Key 'action' not found: the batch needs the dataset's "
                f"actions to clone (it has {sorted(str(k) for k in tensordict.keys(True, True))})."
            )
        action = action.to(observation.dtype if observation.is_floating_point() else None)
        t = torch.randint(ddpm.num_steps, action.shape[:-1], device=action.device)  # [*B]
        noisy, noise = ddpm.add_noise(action, t)
        predicted = ddpm.predict_noise(noisy, observation, t)
        loss = torch.nn.functional.mse_loss(predicted, noise, reduction=self.reduction)
        return TensorDict({"loss_diffusion_bc": loss}, batch_size=[])
