"""Value estimators: returns and advantages as pure functions (``functional``) and the
modules that read a batch, call them and write ``"advantage"`` / ``"value_target"``."""

from torchrl_lite.objectives.value.advantages import (
    GAE,
    TD0Estimator,
    TD1Estimator,
    TDLambdaEstimator,
    ValueEstimatorBase,
)
from torchrl_lite.objectives.value.estimators import ValueEstimators, default_value_kwargs
from torchrl_lite.objectives.value.functional import (
    generalized_advantage_estimate,
    reward2go,
    td0_advantage_estimate,
    td0_return_estimate,
    td1_return_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td1_return_estimate,
    vec_td_lambda_return_estimate,
)
from torchrl_lite.objectives.value.vtrace import VTrace, vtrace_advantage_estimate

__all__ = [
    "GAE",
    "TD0Estimator",
    "TD1Estimator",
    "TDLambdaEstimator",
    "ValueEstimatorBase",
    "ValueEstimators",
    "default_value_kwargs",
    "generalized_advantage_estimate",
    "reward2go",
    "td0_advantage_estimate",
    "td0_return_estimate",
    "td1_return_estimate",
    "td_lambda_return_estimate",
    "vec_generalized_advantage_estimate",
    "vec_td1_return_estimate",
    "vec_td_lambda_return_estimate",
    "VTrace",
    "vtrace_advantage_estimate",
]
