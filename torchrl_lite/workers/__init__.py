"""The one worker layer: what every component that runs work in other processes uses.

* ``process``: start method, factories sent to spawned workers, dead workers, stopping;
* ``channel``: the one wire protocol (a one-byte tag and an optional pickled payload per
  message), its pipe implementation and a poller; ``shm``: shared-memory segments for
  the data of a channel;
* ``errors``: the one error reply (a worker's exception with its traceback) and the
  exception the parent raises for it;
* ``pickling``: a check that factories can be sent to a worker; ``rng``: the global RNG
  states a worker saves, restores and seeds.

Used by ParallelEnv (``envs/batched/``), the multiprocess collectors, the Ray collection
workers (``collectors/distributed/``) and the Scheme.
"""

from torchrl_lite.workers.channel import ERROR, OK, Channel, PipeChannel, Poller
from torchrl_lite.workers.errors import ErrorReply, RemoteError, error_info, remote_error
from torchrl_lite.workers.pickling import check_picklable
from torchrl_lite.workers.process import (
    CloudPickled,
    death_message,
    gl_started,
    parent_alive,
    start_method,
    stop_processes,
)
from torchrl_lite.workers.rng import rng_state, seed_rngs, set_rng_state

__all__ = [
    "ERROR",
    "OK",
    "Channel",
    "CloudPickled",
    "ErrorReply",
    "PipeChannel",
    "Poller",
    "RemoteError",
    "check_picklable",
    "death_message",
    "error_info",
    "gl_started",
    "parent_alive",
    "remote_error",
    "rng_state",
    "seed_rngs",
    "set_rng_state",
    "start_method",
    "stop_processes",
]
