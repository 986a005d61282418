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

With ``augment`` (e.g. a ``RandomShift``), the loss augments the images itself, as the
paper's DrQ does with ``K`` and ``M``: the critic target is the mean of the soft values of
``K`` independently augmented copies of the next observation (``num_target_augs``), and
the critic loss the mean over ``M`` augmented copies of the observation (``num_q_augs``),
all against that one target; the actor and the temperature use the first copy. Without
``augment`` the batch's images are used as they are (augment them in the replay buffer).
A prioritized buffer's importance weights (``"_weight"``) weight the critic loss, and the
per-sample ``"td_error"`` is written into the input batch.

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
        augment: a callable drawing an augmented copy of images ``[*B, C, H, W]`` (e.g.
            ``RandomShift(4)``, whose ``augment`` method is used), or None.
        num_target_augs: DrQ's ``K``: augmented next observations per target (needs
            ``augment``).
        num_q_augs: DrQ's ``M``: augmented observations per critic loss (needs ``augment``).

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
        augment=None,
        num_target_augs: int = 1,
        num_q_augs: int = 1,
    ):
        super().__init__()
        if not isinstance(sac_loss, SACLoss):
            raise TypeError(f"DrQLoss: sac_loss must be a SACLoss, got {type(sac_loss).__name__}.")
        for name, value in (("num_target_augs", num_target_augs), ("num_q_augs", num_q_augs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DrQLoss: {name} must be an int >= 1, got {value!r}.")
        if augment is None and (num_target_augs, num_q_augs) != (1, 1):
            raise ValueError(
                f"DrQLoss: num_target_augs={num_target_augs}, num_q_augs={num_q_augs} need "
                "augment= (e.g. RandomShift(4)): copies of unaugmented images are all equal."
            )
        self.register_network("encoder", encoder, create_target=True)
        self.sac_loss = sac_loss
        self.pixels_key, self.feature_key = pixels_key, feature_key
        self.augment = getattr(augment, "augment", augment)  # a RandomShift, or a function
        self.num_target_augs, self.num_q_augs = num_target_augs, num_q_augs

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """The target encoder's pair, then the SAC loss's (target Q-networks)."""
        return super().target_pairs() + self.sac_loss.target_pairs()

    @property
    def in_keys(self) -> list:
        return [self.pixels_key, K.ACTION, *((K.NEXT, k) for k in (self.pixels_key, *_NEXT_KEYS))]

    @property
    def out_keys(self) -> list:
        return self.sac_loss.out_keys

    def _features_td(self, td: TensorDictBase, z: torch.Tensor, z_next: torch.Tensor | None):
        """The SAC loss's batch: features instead of images (``z_next`` None: no "next"
        features); the action, the next step's flags, the n-step counts and the
        importance weights as in ``td``."""
        nxt = td.get(K.NEXT)
        entries = {k: nxt.get(k) for k in _NEXT_KEYS if k in nxt.keys()}
        if z_next is not None:
            entries[self.feature_key] = z_next
        root = {self.feature_key: z, K.ACTION: td.get(K.ACTION), K.NEXT: entries}
        # n-step batches (MultiStep): the bootstrap's discount; a prioritized buffer's weights
        for key in (_STEPS, self.sac_loss.tensor_keys.priority_weight):
            value = td.get(key, None)
            if value is not None:
                root[key] = value
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
        if self.augment is not None:
            return self._forward_augmented(tensordict, pixels, next_pixels)
        z = self.encoder(pixels)  # [*B, F], trained by the critic loss
        with torch.no_grad():
            z_next = self.target_encoder(next_pixels)  # [*B, F]
        sac, alpha, out = self.sac_loss, self.sac_loss._alpha(), {}
        # each term once, in SACLoss's order (same random draws): the actor's and the
        # temperature's on sg(z), the critic's on z (its gradient reaches the encoder)
        actor_td = self._features_td(tensordict, z.detach(), z_next)
        _, action, log_prob, q_actor = sac._actor_terms(actor_td, alpha, out)
        critic_td = self._features_td(tensordict, z, z_next)
        sac._qvalue_terms(critic_td, alpha, out)
        priority = sac.tensor_keys.priority  # the TD errors, for prioritized replay
        tensordict.set(priority, critic_td.get(priority))
        sac._alpha_terms(actor_td, action, log_prob, out)
        if sac.value_network is not None:
            sac._value_terms(actor_td, alpha, log_prob, q_actor, out)
        return TensorDict(out, batch_size=[])

    def _forward_augmented(self, tensordict, pixels, next_pixels) -> TensorDict:
        """DrQ with ``K`` / ``M`` augmented copies (see the module docstring)."""
        n_k, n_m, batch = self.num_target_augs, self.num_q_augs, tensordict.batch_size
        obs = self.augment(pixels.expand(n_m, *pixels.shape))  # [M, *B, C, H, W]
        z = self.encoder(obs)  # [M, *B, F], trained by the critic loss
        with torch.no_grad():
            next_obs = self.augment(next_pixels.expand(n_k, *next_pixels.shape))  # [K, *B, ...]
            z_next = self.target_encoder(next_obs)  # [K, *B, F]
        sac, alpha, out = self.sac_loss, self.sac_loss._alpha(), {}
        actor_td = self._features_td(tensordict, z[0].detach(), None)  # the first copy
        _, action, log_prob, q_actor = sac._actor_terms(actor_td, alpha, out)
        # the target: the mean over the K copies of the next state's soft value
        next_td = TensorDict({K.NEXT: {self.feature_key: z_next}}, batch_size=[n_k, *batch])
        target = sac._bootstrap(actor_td, sac._next_value(next_td, alpha).mean(0))  # [*B, 1]
        # the critic: each of the M copies against that target
        copies = self._features_td(tensordict, z[0], None).expand(n_m, *batch).clone(False)
        copies.set(self.feature_key, z)
        pred = sac._qvalues(copies)  # [N, M, *B] (or [M, *B])
        sac._td_terms(copies, pred, target.expand(n_m, *target.shape), out, "loss_qvalue")
        td_error = copies.get(sac.tensor_keys.priority).mean(0)  # [*B]: mean over copies
        out["td_error"] = td_error.mean()
        tensordict.set(sac.tensor_keys.priority, td_error)  # for prioritized replay
        sac._alpha_terms(actor_td, action, log_prob, out)
        if sac.value_network is not None:
            sac._value_terms(actor_td, alpha, log_prob, q_actor, out)
        return TensorDict(out, batch_size=[])
