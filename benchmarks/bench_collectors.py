"""Collector benchmarks: frames/s of SyncDataCollector and MultiSyncDataCollector.

Pendulum-v1, a 3-64-64-1 Tanh MLP policy, ``frames_per_batch=1000``, ``BATCHES`` batches.
The floor is a raw loop: a gymnasium step plus the same MLP on a torch tensor. Targets:
``SyncDataCollector`` at least 50% of the raw loop's frames/s; ``MultiSyncDataCollector``
with 2 workers at least 1.6x the single collector. Every ratio compares loops timed in
this run. Run: ``python benchmarks/bench_collectors.py`` (``make bench`` runs them all).
"""

from __future__ import annotations

import os

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from _common import interleaved, smoke, timeit, write_table
from torchrl_lite.collectors import MultiSyncDataCollector, SyncDataCollector
from torchrl_lite.envs import GymEnv

torch.set_num_threads(1)
FRAMES_PER_BATCH = 1000
BATCHES = 5 if smoke() else 20
REPEATS = 1 if smoke() else 3
ENV_ID = "Pendulum-v1"


def make_net() -> nn.Module:
    """The 3-64-64-1 MLP with Tanh activations (and a Tanh output: actions in [-1, 1])."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1), nn.Tanh()
    )


def make_env() -> GymEnv:
    return GymEnv(ENV_ID)


def raw_loop(net: nn.Module, frames: int):
    """The floor: gymnasium steps, actions from the MLP on a torch tensor."""
    env = gym.make(ENV_ID)
    env.reset(seed=0)

    def run() -> None:
        obs, _ = env.reset()
        with torch.no_grad():
            for _ in range(frames):
                action = net(torch.as_tensor(obs)).numpy()
                obs, _reward, terminated, truncated, _ = env.step(action)
                if terminated or truncated:
                    obs, _ = env.reset()

    return run


def general_env() -> GymEnv:
    """The env with its numpy stepper switched off: the collector's general loop (one
    TensorDict per env step), which batches with recurrent policies or truncation take."""
    env = GymEnv(ENV_ID)
    env._numpy_stepper = lambda: None
    return env


def run_batches(iterator, batches: int) -> None:
    for _ in range(batches):
        next(iterator)


def main() -> None:
    frames = FRAMES_PER_BATCH * BATCHES
    net = make_net()
    policy = TensorDictModule(net, in_keys=["observation"], out_keys=["action"])
    single = SyncDataCollector(make_env, policy, frames_per_batch=FRAMES_PER_BATCH)
    general = SyncDataCollector(general_env, policy, frames_per_batch=FRAMES_PER_BATCH)
    it, it_general = iter(single), iter(general)
    t = interleaved(
        {
            "raw": raw_loop(net, frames),
            "sync": lambda: run_batches(it, BATCHES),
            "general": lambda: run_batches(it_general, BATCHES),
        },
        repeats=2 * REPEATS + 1,
    )
    raw, sync = t["raw"], t["sync"]
    single.shutdown()
    general.shutdown()

    times = {}
    for workers in (1, 2):
        multi = MultiSyncDataCollector(
            [make_env] * workers, policy, frames_per_batch=FRAMES_PER_BATCH
        )
        it = iter(multi)
        times[workers] = timeit(lambda it=it: run_batches(it, BATCHES), repeats=REPEATS)
        multi.shutdown()

    fps = {"raw": frames / raw, "sync": frames / sync, "general": frames / t["general"]}
    fps.update({workers: frames / t for workers, t in times.items()})
    rows = [
        ["raw loop (gymnasium + MLP)", fps["raw"], 1.0, "-"],
        ["SyncDataCollector", fps["sync"], fps["sync"] / fps["raw"], ">= 0.8 of raw"],
        ["SyncDataCollector, general loop", fps["general"], fps["general"] / fps["raw"], "-"],
        ["MultiSyncDataCollector, 2 workers", fps[2], fps[2] / fps["sync"], ">= 1.6x Sync"],
        ["MultiSyncDataCollector, 1 worker (IPC cost)", fps[1], fps[1] / fps["sync"], "-"],
    ]
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    write_table(
        "collectors",
        "Collectors: frames/s on Pendulum-v1 (3-64-64-1 Tanh MLP policy)",
        ["case", "frames/s", "ratio", "target"],
        rows,
        notes=(
            f"frames_per_batch={FRAMES_PER_BATCH}, {BATCHES} batches per run, median of "
            f"{2 * REPEATS + 1} interleaved runs (raw, Sync, general loop), 1 torch thread per process, {os.cpu_count()} CPUs (load average "
            f"{load:.1f} at the end). Ratios: SyncDataCollector against the raw loop, the "
            "multiprocess collectors against SyncDataCollector; 2 workers need 2 idle cores. "
            "After its first batch, SyncDataCollector steps the env's numpy stepper; 'general "
            "loop' is the one-TensorDict-per-step path (recurrent policies, truncation)."
        ),
    )


if __name__ == "__main__":
    main()
