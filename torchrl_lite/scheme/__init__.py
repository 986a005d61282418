"""Seed 000's distributed training architecture: ``Scheme`` (workers and how they talk).

``Scheme`` with one collection and one gradient worker runs in this process and never
imports Ray; more workers run as Ray actors (``ray.init()`` on one machine,
``ray.init(address="auto")`` on a cluster). ``torchrl_lite.Learner`` drives it.
"""

from torchrl_lite.scheme.gradient_worker import GradientWorker, worker_seed
from torchrl_lite.scheme.scheme import Scheme

__all__ = ["GradientWorker", "Scheme", "worker_seed"]
