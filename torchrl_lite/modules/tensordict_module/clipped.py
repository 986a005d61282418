"""``ClippedProbabilisticActor``: an unsquashed policy whose action is clipped for the env.

An unbounded distribution (e.g. a Gaussian, or gSDE's ``GSDENormal``) samples a raw action;
the env receives it clipped to the action bounds, and the log-probability is that of the
raw sample (what SB3's PPO does, ``squash_output=False``). The raw sample is kept in the
data (``raw_action_key``), so a loss scores the action that was drawn: the on-policy
losses (PPO, A2C, REINFORCE) read ``raw_action_key`` from such an actor themselves.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.modules.tensordict_module.actors import ProbabilisticActor

__all__ = ["ClippedProbabilisticActor"]


def _bound(value, name: str) -> torch.Tensor:
    bound = torch.as_tensor(value, dtype=torch.float32)
    if not bool(torch.isfinite(bound).all()):
        raise ValueError(
            f"ClippedProbabilisticActor: {name} must be finite, got {value!r}; clipping needs "
            f"a bounded action space (for an unbounded one use ProbabilisticActor)."
        )
    return bound


class ClippedProbabilisticActor(ProbabilisticActor):
    """A ``ProbabilisticActor`` that writes its sample at ``raw_action_key`` (with its
    log-probability at ``"sample_log_prob"``) and the sample clipped to ``[low, high]`` at
    ``"action"``, which is what the env steps with.

    Args:
        module: a TensorDict module writing the distribution parameters.
        in_keys: the parameter entries the distribution reads.
        low, high: the action bounds (numbers or tensors broadcastable to the action).
        raw_action_key: where the unclipped sample goes (default ``"raw_action"``).
        **kwargs: as for ``ProbabilisticActor`` (``distribution_class``,
            ``return_log_prob``, ...); ``out_keys`` is ``[raw_action_key]``.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl_lite.modules import IndependentNormal
        >>> from torchrl_lite.envs.utils import ExplorationType, set_exploration_type
        >>> net = TensorDictModule(lambda o: (o, torch.ones_like(o)),
        ...     in_keys=["observation"], out_keys=["loc", "scale"])
        >>> actor = ClippedProbabilisticActor(net, ["loc", "scale"], low=-1.0, high=1.0,
        ...     distribution_class=IndependentNormal, return_log_prob=True)
        >>> td = TensorDict(observation=torch.tensor([[3.0, -0.5]]), batch_size=[1])
        >>> with set_exploration_type(ExplorationType.DETERMINISTIC):
        ...     td = actor(td)
        >>> td["raw_action"], td["action"]
        (tensor([[ 3.0000, -0.5000]]), tensor([[ 1.0000, -0.5000]]))
    """

    def __init__(self, module, in_keys, *, low, high, raw_action_key="raw_action", **kwargs):
        if "out_keys" in kwargs:
            raise ValueError(
                f"ClippedProbabilisticActor: out_keys is fixed to [raw_action_key] "
                f"(got out_keys={kwargs['out_keys']!r}); set raw_action_key instead."
            )
        if raw_action_key == K.ACTION:
            raise ValueError(
                f"ClippedProbabilisticActor: raw_action_key must differ from {K.ACTION!r} "
                f"(the clipped action the env takes), got {raw_action_key!r}."
            )
        low, high = _bound(low, "low"), _bound(high, "high")
        if bool((low > high).any()):
            raise ValueError(
                f"ClippedProbabilisticActor: low must be <= high, got low={low.tolist()} and "
                f"high={high.tolist()}."
            )
        super().__init__(module, in_keys, out_keys=[raw_action_key], **kwargs)
        self.raw_action_key = raw_action_key
        self.register_buffer("low", low)
        self.register_buffer("high", high)
        self._refresh_keys()

    def _refresh_keys(self) -> None:
        super()._refresh_keys()
        if K.ACTION not in self.out_keys:
            self.out_keys = [*self.out_keys, K.ACTION]

    def forward(self, tensordict: TensorDictBase, *args, **kwargs) -> TensorDictBase:
        out = super().forward(tensordict, *args, **kwargs)
        raw = out.get(self.raw_action_key)
        out.set(K.ACTION, torch.maximum(torch.minimum(raw, self.high), self.low))
        return out
