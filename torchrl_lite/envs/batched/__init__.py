"""Batched environments: ``n`` copies of an env run as one env of batch size
``[n, *env.batch_size]``.

* ``base.py``: what both share (argument checks, specs, key layout, restart, views);
* ``serial.py``: ``SerialEnv``, the copies stepped one after the other in this process;
* ``parallel.py``: ``ParallelEnv``, groups of copies in worker processes; ``worker.py``
  is the worker's loop, ``commands.py`` the parent's side of its commands;
* ``lazy.py``: copies whose specs differ (multi-task), given lazy stacks;
* ``view.py``: ``env[idx]``, a live view of some copies; ``utils.py``: shared helpers.
"""

from torchrl_lite.envs.batched.lazy import is_lazy_env
from torchrl_lite.envs.batched.parallel import ParallelEnv
from torchrl_lite.envs.batched.serial import SerialEnv

__all__ = ["ParallelEnv", "SerialEnv", "is_lazy_env"]
