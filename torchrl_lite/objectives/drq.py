"""DrQ: SAC from pixels with one conv encoder shared by actor and critic, trained by the critic.

Papers: Kostrikov, Yarats, Fergus 2020, "Image Augmentation Is All You Need: Regularizing
Deep Reinforcement Learning from Pixels", https://arxiv.org/abs/2004.13649; Yarats et al.
2019 (SAC-AE: the encoder is updated by the critic only), https://arxiv.org/abs/1910.01741.

With ``z = f(o)`` the online encoder's features of the (augmented) observation and
``z' = f'(o')`` the target encoder's features of the next one (no grad):

- ``loss_qvalue`` is SAC's critic loss on ``(z, a, r, z')``: it trains the Q-networks
  **and** the encoder ``f``;
- ``loss_actor`` and ``loss_alpha`` are SAC's on ``(sg(z), ...)``: the features are
  detached, so the actor never moves the encoder (nor the Q-networks);
- ``f'`` follows ``f`` with the same ``SoftUpdate`` as the target Q-networks.

Shapes: observations ``[*B, C, H, W]`` (uint8 or float; the encoder scales them), features
``[*B, F]``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.objectives.common import LossModule
from torchrl_lite.objectives.sac import SACLoss

__all__ = ["DrQLoss"]

_NEXT_KEYS = (K.REWARD, K.DONE, K.TERMINATED)
_STEPS = "steps_to_next_obs"


class DrQLoss(LossModule):
    """SAC on the features of a shared encoder that only the critic loss trains.

    Args:
        encoder: an ``nn.Module`` mapping ``[*B, C, H, W]`` images to ``[*B, F]`` features.
        sac_loss: a ``SACLoss`` whose actor and Q-networks read ``feature_key`` (and
            ``"action"``); it keeps its own target Q-networks.
        pixels_key: the image entry read at the root and under ``"next"``.
        feature_key: the feature entry the actor and the Q-networks read.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
        >>> from torchrl_lite.objectives import SoftUpdate
        >>> encoder = nn.Sequential(nn.Flatten(-3), nn.Linear(2 * 8 * 8, 6))
        >>> actor = ProbabilisticActor(TensorDictModule(nn.Sequential(nn.Linear(6, 2),
        ...     NormalParamExtractor()), ["features"], ["loc", "scale"]), ["loc", "scale"],
        ...     distribution_class=TanhNormal)
        >>> qvalue = ValueOperator(MLP(in_features=7, out_features=1), ["features", "action"])
        >>> loss = DrQLoss(encoder, SACLoss(actor, qvalue, action_spec=None, gamma=0.99))
        >>> batch = TensorDict(pixels=torch.rand(4, 2, 8, 8), action=torch.rand(4, 1),
        ...     next=TensorDict(pixels=torch.rand(4, 2, 8, 8), reward=torch.rand(4, 1),
        ...         done=torch.zeros(4, 1, dtype=torch.bool),
        ...         terminated=torch.zeros(4, 1, dtype=torch.bool), batch_size=[4]),
        ...     batch_size=[4])
        >>> sorted(k for k in loss(batch).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_alpha', 'loss_qvalue']
        >>> SoftUpdate(loss, tau=0.01).step()
    """

    def __init__(
        self,
        encoder: nn.Module,
        sac_loss: SACLoss,
        *,
        pixels_key: str = K.PIXELS,
        feature_key: str = "features",
    ):
        super().__init__()
        if not isinstance(sac_loss, SACLoss):
            raise TypeError(f"DrQLoss: sac_loss must be a SACLoss, got {type(sac_loss).__name__}.")
        self.register_network("encoder", encoder, create_target=True)
        self.sac_loss = sac_loss
        self.pixels_key, self.feature_key = pixels_key, feature_key

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """The target encoder's pair, then the SAC loss's (target Q-networks)."""
        return super().target_pairs() + self.sac_loss.target_pairs()

    @property
    def in_keys(self) -> list:
        return [self.pixels_key, K.ACTION, *((K.NEXT, k) for k in (self.pixels_key, *_NEXT_KEYS))]

    @property
    def out_keys(self) -> list:
        return self.sac_loss.out_keys

    def _features_td(self, td: TensorDictBase, z: torch.Tensor, z_next: torch.Tensor):
        nxt = td.get(K.NEXT)
        entries = {k: nxt.get(k) for k in _NEXT_KEYS if k in nxt.keys()}
        entries[self.feature_key] = z_next
        root = {self.feature_key: z, K.ACTION: td.get(K.ACTION), K.NEXT: entries}
        steps = td.get(_STEPS, None)  # n-step batches (MultiStep): the bootstrap's discount
        if steps is not None:
            root[_STEPS] = steps
        return TensorDict(root, batch_size=td.batch_size)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        """The DrQ losses on a batch ``[*B]`` (see the module docstring)."""
        pixels = tensordict.get(self.pixels_key, None)
        next_pixels = tensordict.get((K.NEXT, self.pixels_key), None)
        if pixels is None or next_pixels is None:
            missing = self.pixels_key if pixels is None else (K.NEXT, self.pixels_key)
            raise KeyError(
                f"DrQLoss: the batch has no {missing!r} entry (keys: "
                f"{sorted(map(str, tensordict.keys(True, True)))}); pass pixels_key=..."
            )
        z = self.encoder(pixels)  # [*B, F], trained by the critic loss
        with torch.no_grad():
            z_next = self.target_encoder(next_pixels)  # [*B, F]
        sac, alpha, out = self.sac_loss, self.sac_loss._alpha(), {}
        # each term once, in SACLoss's order (same random draws): the actor's and the
        # temperature's on sg(z), the critic's on z (its gradient reaches the encoder)
        actor_td = self._features_td(tensordict, z.detach(), z_next)
        _, action, log_prob, q_actor = sac._actor_terms(actor_td, alpha, out)
        sac._qvalue_terms(self._features_td(tensordict, z, z_next), alpha, out)
        sac._alpha_terms(actor_td, action, log_prob, out)
        if sac.value_network is not None:
            sac._value_terms(actor_td, alpha, log_prob, q_actor, out)
        return TensorDict(out, batch_size=[])
