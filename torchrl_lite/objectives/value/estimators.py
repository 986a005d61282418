"""``ValueEstimators``: the estimator kinds a loss can be given, and their default settings."""

from __future__ import annotations

from enum import Enum

from torchrl_lite.objectives.value.advantages import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
)

__all__ = ["ValueEstimators", "default_value_kwargs"]


class ValueEstimators(Enum):
    """The value estimators a loss can be given (``loss.make_value_estimator(...)``)."""

    TD0 = "Bootstrapped TD (1-step return)"
    TD1 = "TD(1) (infinity-step return)"
    TDLambda = "TD(lambda)"
    GAE = "Generalized advantage estimate"

    @property
    def estimator_class(self) -> type[ValueEstimatorBase]:
        """The estimator module of this kind, e.g. ``ValueEstimators.GAE`` -> :class:`GAE`."""
        return {
            ValueEstimators.TD0: TD0Estimator,
            ValueEstimators.TD1: TD1Estimator,
            ValueEstimators.TDLambda: TDLambdaEstimator,
            ValueEstimators.GAE: GAE,
        }[self]


# estimator hyper-parameters used when neither the constructor nor the call gives them
_DEFAULT_VALUE_KWARGS = {
    ValueEstimators.TD0: {"gamma": 0.99},
    ValueEstimators.TD1: {"gamma": 0.99},
    ValueEstimators.TDLambda: {"gamma": 0.99, "lmbda": 0.95},
    ValueEstimators.GAE: {"gamma": 0.99, "lmbda": 0.95},
}


def default_value_kwargs(value_type: ValueEstimators) -> dict:
    """The default hyper-parameters of a value estimator (a new dict), as the losses use them.

    Example:
        >>> default_value_kwargs(ValueEstimators.GAE)
        {'gamma': 0.99, 'lmbda': 0.95}
    """
    if not isinstance(value_type, ValueEstimators):
        raise TypeError(
            f"default_value_kwargs: expected a ValueEstimators member "
            f"({[v.name for v in ValueEstimators]}), got {value_type!r}."
        )
    return dict(_DEFAULT_VALUE_KWARGS[value_type])
