"""Collection scaling with the number of workers: ``RayCollector(N)`` against
``SyncDataCollector`` and ``MultiSyncDataCollector(N)`` in the same run.

For each env (Pendulum-v1; HalfCheetahBulletEnv-v0 when pybullet-envs-gymnasium is
installed) and each worker count N, every worker collects ``FRAMES_PER_WORKER`` frames
per batch (a 64-64 Tanh MLP policy, 1 torch thread per process); the three collectors are
timed interleaved (median of ``repeats`` runs of ``batches`` batches). Then Ray's own cost
per batch (``bench_scheme.ray_costs``: weights out, a ready 1000-frame batch back).
Targets: 8 workers >= 6x SyncDataCollector and >= 0.9x MultiSyncDataCollector(8); cost
per batch <= 1 ms median.

The worker counts default to those of 1, 2, 4, 8, 12 that the machine has cores for
(``--workers`` chooses); Ray is started with that many CPUs (3 at least, for the cost
measurement). On 16 cores the default run
takes about 5 minutes.

Run: ``python benchmarks/bench_scheme.py scaling [--workers 1 2 4 8 12] [--quick]`` (or
``python benchmarks/scheme_scaling.py`` with the same options).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from _common import interleaved, load_average, write_table
from torchrl_lite.collectors import MultiSyncDataCollector, SyncDataCollector
from torchrl_lite.envs import GymEnv

FRAMES_PER_WORKER = 1000
COUNTS = (1, 2, 4, 8, 12)
ENVS = {"Pendulum-v1": (3, 1), "HalfCheetahBulletEnv-v0": (26, 6)}  # obs, action sizes


def make_pendulum() -> GymEnv:
    return GymEnv("Pendulum-v1")


def make_halfcheetah() -> GymEnv:
    import pybullet_envs_gymnasium  # noqa: F401 (registers the Bullet ids)

    return GymEnv("HalfCheetahBulletEnv-v0")


MAKERS = {"Pendulum-v1": make_pendulum, "HalfCheetahBulletEnv-v0": make_halfcheetah}


def make_policy(obs: int, act: int) -> TensorDictModule:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(obs, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(),
                        nn.Linear(64, act), nn.Tanh())  # fmt: skip
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def default_counts() -> list[int]:
    """Those of ``COUNTS`` that fit the machine's cores (at least 1)."""
    cores = os.cpu_count() or 1
    return [n for n in COUNTS if n <= cores] or [1]


def available_envs() -> list[str]:
    try:
        import pybullet_envs_gymnasium  # noqa: F401
    except ImportError:
        return ["Pendulum-v1"]
    return list(ENVS)


def measure(env_id: str, counts: list[int], batches: int, repeats: int) -> list[list]:
    """Rows ``[env, N, sync fps, multi fps, ray fps, ray/sync, ray/multi]``."""
    from torchrl_lite.collectors.distributed import RayCollector

    make, policy = MAKERS[env_id], make_policy(*ENVS[env_id])
    sync = SyncDataCollector(make, policy, frames_per_batch=FRAMES_PER_WORKER)
    rows = []
    for n in counts:
        frames = FRAMES_PER_WORKER * n
        multi = MultiSyncDataCollector([make] * n, policy, frames_per_batch=frames)
        ray_n = RayCollector([make] * n, policy, frames_per_batch=frames)
        iterators = {"sync": iter(sync), "multi": iter(multi), "ray": iter(ray_n)}
        fns = {name: (lambda it=it: [next(it) for _ in range(batches)])
               for name, it in iterators.items()}  # fmt: skip
        seconds = interleaved(fns, repeats=repeats)
        multi.shutdown()
        ray_n.shutdown()
        per = {"sync": FRAMES_PER_WORKER, "multi": frames, "ray": frames}
        fps = {name: per[name] * batches / t for name, t in seconds.items()}
        rows.append([env_id, n, fps["sync"], fps["multi"], fps["ray"],
                     fps["ray"] / fps["sync"], fps["ray"] / fps["multi"]])  # fmt: skip
        print(rows[-1], flush=True)
    sync.shutdown()
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="bench_scheme.py scaling")
    parser.add_argument("--workers", type=int, nargs="*", default=None,
                        help=f"worker counts (default: those of {COUNTS} this machine's cores "
                        f"allow)")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="3 runs of 2 batches each")
    args = parser.parse_args(argv)
    counts = args.workers or default_counts()
    batches, repeats = (2, 3) if args.quick else (3, 5)
    os.environ.setdefault("RAY_worker_niceness", "0")  # the collectors compared run at ours
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
    torch.set_num_threads(1)
    import ray
    from bench_scheme import ray_costs

    start, load = time.perf_counter(), load_average()
    cpus = max(*counts, 3)  # ray_costs runs 3 one-worker groups at once
    ray.init(address="local", num_cpus=cpus, include_dashboard=False,
             object_store_memory=200 * 1024**2)  # fmt: skip
    rows = []
    for env_id in available_envs():
        rows += measure(env_id, counts, batches, repeats)
    batch = SyncDataCollector(make_pendulum, make_policy(3, 1), frames_per_batch=1000).next()
    costs = ray_costs(ray, batch, calls=30 if args.quick else 50)
    ray.shutdown()
    table = [[env, n, s, m, r, rs, rm, ">= 6x Sync, >= 0.9x Multi" if n == 8 else "-"]
             for env, n, s, m, r, rs, rm in rows]  # fmt: skip
    table.append(["Ray cost per batch (ms, same-node channel)", "-", "-", "-",
                  costs["channel"], "-", "-", "<= 1 ms"])  # fmt: skip
    table.append(["  same, Ray calls (workers on other nodes)", "-", "-", "-", costs["new"],
                  "-", "-", "-"])  # fmt: skip
    write_table(
        "scheme_scaling",
        "Scheme / RayCollector: collection scaling with the number of workers",
        ["env", "workers N", "Sync fps", "MultiSync(N) fps", "RayCollector(N) fps",
         "Ray / Sync", "Ray / MultiSync(N)", "target"],
        table,
        notes=(
            f"{FRAMES_PER_WORKER} frames per worker per batch (Sync: one worker), a 64-64 Tanh "
            f"MLP policy, 1 torch thread per process; median of {repeats} interleaved runs of "
            f"{batches} batches{' (--quick)' if args.quick else ''}. {os.cpu_count()} CPUs, "
            f"Ray started with {cpus}; load average {load:.1f} at the start, "
            f"{load_average():.1f} at the end; {time.perf_counter() - start:.0f} s in all. "
            f"Ray's cost per batch: median of the calls of bench_scheme.ray_costs."
        ),
    )  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1:])
