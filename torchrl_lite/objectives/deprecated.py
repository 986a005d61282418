"""``REDQLoss_deprecated``: the name TorchRL's REDQ script still imports.

It is :class:`~torchrl_lite.objectives.redq.REDQLoss` with that class's old defaults
(temperature bounded to ``[0.1, 10]``) and the old ``gSDE`` switch.
"""

from __future__ import annotations

from torchrl_lite.objectives.redq import REDQLoss

__all__ = ["REDQLoss_deprecated"]


class REDQLoss_deprecated(REDQLoss):  # noqa: N801  (TorchRL's name)
    """REDQ (https://openreview.net/forum?id=AY8zfZm0tDd) with the deprecated class's defaults.

    Args:
        actor_network: a probabilistic actor.
        qvalue_network: the Q-network, copied ``num_qvalue_nets`` times.
        gSDE: must be False: a gSDE actor's noise is handled by the actor itself here
            (build it with ``GSDEHead`` and use :class:`REDQLoss`).
        min_alpha: lower bound of the temperature (default 0.1).
        max_alpha: upper bound of the temperature (default 10).
        **kwargs: :class:`REDQLoss`'s other options (``num_qvalue_nets``,
            ``sub_sample_len``, ``loss_function``, ``delay_qvalue``, ``gamma``, ...).
    """

    def __init__(
        self,
        actor_network,
        qvalue_network,
        *,
        gSDE: bool = False,  # noqa: N803
        min_alpha: float | None = 0.1,
        max_alpha: float | None = 10.0,
        **kwargs,
    ):
        if gSDE:
            raise ValueError(
                "REDQLoss_deprecated: gSDE=True is not supported; build the actor with a "
                "GSDEHead (torchrl_lite.modules) and use REDQLoss."
            )
        super().__init__(
            actor_network, qvalue_network, min_alpha=min_alpha, max_alpha=max_alpha, **kwargs
        )
