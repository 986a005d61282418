"""Scheme benchmarks: Ray collection throughput, Ray's per-batch cost, a scaling model,
and PPO on Pendulum-v1 to -200 with several Scheme layouts.

* Collection: frames/s on Pendulum-v1 (3-64-64-1 Tanh MLP policy, 1000 frames per batch) of
  ``SyncDataCollector``, ``MultiSyncDataCollector(2)`` and ``RayCollector`` with 1 and 2
  workers, built once and timed interleaved (median of ``REPEATS`` runs). Targets: Ray with
  2 workers >= 1.7x SyncDataCollector and >= 0.9x MultiSyncDataCollector(2).
* Ray's own cost per batch: a ``RolloutWorker`` actor whose collector returns a ready
  1000-frame batch, called with new weights each time: weights out + batch back (rebuilt
  as a TensorDict), median ms as the driver sees it (target <= 1 ms), through the
  same-node shared-memory channel (``RayCollector``'s default, ``channel="auto"``); timed
  interleaved with the Ray-call path (``channel="ray"``: packed buffers in a Ray call, what
  workers on other nodes use), the transport before that (pickled TensorDicts) and a bare
  actor call (the floor of any Ray-call path).
* Scaling model: with ``t_c(N)`` the slowest worker's own seconds per batch while N
  workers collect (measured inside the workers) and ``o`` Ray's cost per batch (the
  driver receives batches one after the other), a synchronous round of N workers takes
  ``t_c(N) + N * o``, so frames/s(N) = ``N * F / (t_c(N) + N * o)``. Checked against the
  measured N = 1, 2 (same node: ``o`` of the channel); for N nodes with a core per worker
  ``t_c(N) = t_c(1)`` and ``o`` of the Ray-call path (workers on other nodes; network time
  not included).
* Learning: PPO (the recipe's values through ``torchrl_lite.agent``) on Pendulum-v1 until
  the mean of the last 10 episode returns reaches -200, for 1/1, 2x1 sync, 2x1 async and
  1x2 sync: frames and seconds (Scheme start-up reported apart), per seed.

Run: ``python benchmarks/bench_scheme.py [collection|learning|all] [--quick] [--seeds 0 1 2]``;
``python benchmarks/bench_scheme.py halfcheetah [--run-dir DIR] [--resume]`` runs the seed's
task to 2M frames (``benchmarks/scheme_halfcheetah.py``, hours; not part of ``all``);
``python benchmarks/bench_scheme.py scaling [--workers 1 2 4 8 12]`` measures collection
with 1 to 12 workers against SyncDataCollector and MultiSyncDataCollector(N) on Pendulum
and HalfCheetahBullet (``benchmarks/scheme_scaling.py``; for a many-core machine, not part
of ``all``).
Ray needs idle cores: on a loaded machine the figures say little (the load is printed).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time

import torch
from tensordict.nn import TensorDictModule
from torch import nn

from _common import RESULTS_DIR, interleaved, smoke, write_table
from torchrl_lite.collectors import MultiSyncDataCollector, SyncDataCollector
from torchrl_lite.envs import GymEnv

torch.set_num_threads(1)
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
FRAMES_PER_BATCH = 1000
BATCHES = 3 if smoke() else 5
REPEATS = 1 if smoke() else 7
CALLS = 10 if smoke() else 50
ENV_ID = "Pendulum-v1"
LAYOUTS = [  # (name, col workers, col mode, grad workers, grad mode)
    ("1/1", 1, "synchronous", 1, "synchronous"),
    ("2x1 sync", 2, "synchronous", 1, "synchronous"),
    ("2x1 async", 2, "asynchronous", 1, "synchronous"),
    ("1x2 sync", 1, "synchronous", 2, "synchronous"),
]


def make_policy() -> TensorDictModule:
    torch.manual_seed(0)
    net = nn.Sequential(
        nn.Linear(3, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1), nn.Tanh()
    )
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


def make_env() -> GymEnv:
    return GymEnv(ENV_ID)


def _load() -> float:
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")


def _autogroup_note() -> str:
    """A warning when Linux's autogroup scheduling is on: every process of this run (the
    driver, MultiSync's and Ray's workers) then shares one scheduling group, which gets its
    share of the CPUs against other sessions' groups however many processes it runs."""
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            on = f.read().strip() == "1"
    except OSError:
        return ""
    return (
        " Linux autogroup scheduling is on: all processes of this run share one group's CPU "
        "share against other sessions, so under load the parallel collectors cannot show "
        "their speedup (run it on an otherwise idle machine)."
        if on
        else ""
    )


class _Canned:
    """A collector that returns the same ready batch (isolates Ray's cost)."""

    def __init__(self, batch):
        self.batch = batch

    def next(self):
        return self.batch

    def shutdown(self):
        pass


def _ceiling_worker(conn) -> None:
    """One side of ``_Ceiling``: a ``SyncDataCollector`` of its own, ``n`` batches per
    request, no data sent back (only the word that it is done)."""
    torch.set_num_threads(1)
    collector = SyncDataCollector(make_env, make_policy(), frames_per_batch=FRAMES_PER_BATCH)
    collector.next()
    while (n := conn.recv()) is not None:
        for _ in range(n):
            collector.next()
        conn.send(n)
    collector.shutdown()


class _Ceiling:
    """This machine's parallel ceiling for 2 workers: two independent processes, each a
    ``SyncDataCollector`` as the in-process one, started together; no batch crosses a
    process boundary, so nothing is spent on transport. Ray's and MultiSync's 2 workers
    can at best match it; on an idle 2-core machine it is 2x SyncDataCollector."""

    def __init__(self, workers: int = 2):
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self.conns, self.procs = [], []
        for _ in range(workers):
            here, there = ctx.Pipe()
            proc = ctx.Process(target=_ceiling_worker, args=(there,), daemon=True)
            proc.start()
            self.conns.append(here)
            self.procs.append(proc)

    def run(self, batches: int) -> None:
        for conn in self.conns:
            conn.send(batches)
        for conn in self.conns:
            conn.recv()

    def shutdown(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=10)


def ray_costs(ray, batch, calls: int) -> dict:
    """Median ms per batch, as the driver sees it, of Ray's own cost: new weights out (made
    as ``RayCollector.update_policy_weights_`` makes them) and one batch back (rebuilt as a
    TensorDict) from a ``RolloutWorker`` actor whose collector returns a ready
    ``len(batch)``-frame batch, through the ``WorkerGroup`` calls ``RayCollector`` uses:
    over the same-node channel (``"channel"``) and as a Ray call (``"new"``, packed
    buffers). Timed interleaved with the previous transport (``"old"``, weights: one
    ``ray.put`` of a TensorDict; batch: the TensorDict pickled) and a bare actor call
    (``"floor"``, Ray's floor)."""
    from tensordict import TensorDict

    from torchrl_lite.collectors.distributed import RolloutWorker, WorkerGroup
    from torchrl_lite.collectors.distributed.transport import open_result, weights_message

    policy = make_policy()
    state = TensorDict.from_module(policy).data

    def args_for(pack_batches):
        return lambda index, restarts: (
            (lambda: (_Canned(batch), lambda weights: None),), {"pack_batches": pack_batches}
        )  # fmt: skip

    groups = {packed: WorkerGroup("cost", RolloutWorker, args_for(packed), 1, {"num_cpus": 1})
              for packed in (True, False)}  # fmt: skip
    groups["channel"] = WorkerGroup("cost", RolloutWorker, args_for(True), 1, {"num_cpus": 1},
                                    channel="auto")  # fmt: skip
    for group in groups.values():
        group.start()
    assert groups["channel"].channels[0] is not None, "the channel did not open"
    # distinct new weights for every call, made beforehand (making them is not Ray's cost)
    states = iter([state + i for i in range(3 * (calls + 2))])
    version = [0]

    def new_transport(key=True):
        version[0] += 1
        weights = weights_message(next(states))
        group = groups[key]
        (result,) = group.gather({0: group.call(0, "collect", weights, version[0])}).values()
        open_result(result)

    def old_transport():
        version[0] += 1
        weights = ray.put(next(states).clone())
        group = groups[False]
        group.gather({0: group.call(0, "collect", weights, version[0])})

    def bare_call():
        groups[True].gather({0: groups[True].call(0, "ping")})

    fns = {"channel": lambda: new_transport("channel"), "new": new_transport,
           "old": old_transport, "floor": bare_call}  # fmt: skip
    times = interleaved(fns, repeats=calls, warmup=2)
    for group in groups.values():
        group.shutdown()
    return {name: 1000 * t for name, t in times.items()}


def worker_seconds(collector, rounds: int = 5) -> tuple[float, float, int]:
    """``(t_c, fps, frames)``: over ``rounds`` synchronous rounds (every worker of
    ``collector`` collecting one batch at once, new weights sent each round), the median of
    the slowest worker's own seconds per batch (each worker times itself), the frames/s of
    those rounds measured on the driver at the same time, and a worker's frames per batch
    (a sync ``RayCollector`` splits ``frames_per_batch`` over its workers)."""
    from tensordict import TensorDict

    from torchrl_lite.collectors.distributed.transport import open_result, weights_message

    group = collector.group
    state = TensorDict.from_module(collector.policy).data
    slowest, walls, frames = [], [], 0
    for i in range(rounds):
        start = time.perf_counter()
        weights = weights_message(state + i)  # new weights each round, as a training loop
        refs = {w: group.call(w, "collect", weights, i) for w in range(group.count)}
        metas = {w: open_result(r) for w, r in group.gather(refs).items()}
        walls.append(time.perf_counter() - start)
        slowest.append(max(meta["seconds"] for _, meta in metas.values()))
        frames = max(meta["frames"] for _, meta in metas.values())
    return statistics.median(slowest), group.count * frames / statistics.median(walls), frames


def predicted_fps(n: int, t_c: float, o: float, frames: int = FRAMES_PER_BATCH) -> float:
    """The scaling model: a synchronous round of ``n`` workers takes the slowest worker's
    ``t_c`` plus ``n`` times Ray's per-batch cost ``o`` on the driver (batches arrive one
    after the other), for ``n * frames`` frames (``frames`` per worker).

    Example:
        >>> round(predicted_fps(2, 0.5, 0.01))
        3846
    """
    return n * frames / (t_c + n * o)


def collection(quick: bool = False) -> dict:
    # Ray starts its workers at nice 15 unless told otherwise; the collectors compared here
    # (and MultiSync's worker processes) run at the driver's priority, so Ray's do too
    os.environ.setdefault("RAY_worker_niceness", "0")
    import ray

    from torchrl_lite.collectors.distributed import RayCollector

    batches, repeats, calls = (3, 5, 30) if quick else (BATCHES, REPEATS, CALLS)
    load_start = _load()
    policy = make_policy()
    collectors = {  # the process workers fork before Ray starts its threads
        "SyncDataCollector": SyncDataCollector(make_env, policy, frames_per_batch=FRAMES_PER_BATCH),
        "MultiSyncDataCollector(2)": MultiSyncDataCollector(
            [make_env] * 2, policy, frames_per_batch=FRAMES_PER_BATCH
        ),
    }
    iter(collectors["MultiSyncDataCollector(2)"]).__next__()  # its workers are up
    ceiling = _Ceiling(2)
    ceiling.run(1)  # both are up
    # 5 logical CPUs: RayCollector(1), (2) and (2) on Ray calls live together (timed one
    # after the other; the idle ones sleep)
    ray.init(
        address="local", num_cpus=5, include_dashboard=False, object_store_memory=200 * 1024**2
    )
    collectors |= {
        "RayCollector(1)": RayCollector(
            make_env, policy, frames_per_batch=FRAMES_PER_BATCH, num_collectors=1
        ),  # fmt: skip
        "RayCollector(2)": RayCollector(
            make_env, policy, frames_per_batch=FRAMES_PER_BATCH, num_collectors=2
        ),  # fmt: skip
        "RayCollector(2) Ray calls": RayCollector(
            make_env, policy, frames_per_batch=FRAMES_PER_BATCH, num_collectors=2, channel="ray"
        ),  # fmt: skip
    }
    for name, c in collectors.items():  # the channel opened where it should
        if name.startswith("RayCollector"):
            assert all((ch is None) == name.endswith("Ray calls") for ch in c.group.channels)
    iterators = {name: iter(c) for name, c in collectors.items()}

    def run(it):
        return lambda: [next(it) for _ in range(batches)]

    cases = {name: run(it) for name, it in iterators.items()}
    cases["2 independent processes"] = lambda: ceiling.run(batches)  # each: as many as Sync
    seconds = interleaved(cases, repeats=repeats)
    ceiling.shutdown()
    fps = {n: FRAMES_PER_BATCH * batches / t for n, t in seconds.items()}
    fps["2 independent processes"] *= 2  # two processes' frames
    # one worker's own seconds per batch (inside the actor), for the scaling model
    rounds = {n: worker_seconds(collectors[f"RayCollector({n})"]) for n in (1, 2)}
    t_c = {n: r[0] for n, r in rounds.items()}
    round_fps = {n: r[1] for n, r in rounds.items()}
    per_worker = {n: r[2] for n, r in rounds.items()}
    batch = collectors["SyncDataCollector"].next()
    for c in collectors.values():
        c.shutdown()
    costs = ray_costs(ray, batch, calls)
    ray.shutdown()
    cost, ray_cost = costs["channel"], costs["new"]
    o, o_ray = cost / 1000, ray_cost / 1000
    model = {n: predicted_fps(n, t_c[n], o, per_worker[n]) for n in (1, 2)}
    # N nodes, a core per worker, each worker a whole batch per round (as the Scheme's);
    # workers on other nodes than the driver's are sent Ray calls
    nodes = {n: predicted_fps(n, t_c[1], o_ray, per_worker[1]) for n in (4, 8, 16)}
    sync, multi = fps["SyncDataCollector"], fps["MultiSyncDataCollector(2)"]
    ray2 = fps["RayCollector(2) Ray calls"]
    top = fps["2 independent processes"]
    rows = [
        ["SyncDataCollector", sync, 1.0, "-"],
        ["2 independent processes (the machine's ceiling for 2 workers)", top, top / sync, "-"],
        ["MultiSyncDataCollector(2)", multi, multi / sync, "-"],
        ["RayCollector(1)", fps["RayCollector(1)"], fps["RayCollector(1)"] / sync, "-"],
        [
            "RayCollector(2)",
            fps["RayCollector(2)"],
            fps["RayCollector(2)"] / sync,
            ">= 1.7x Sync",
        ],  # fmt: skip
        [
            "RayCollector(2) vs MultiSync(2)",
            fps["RayCollector(2)"],
            fps["RayCollector(2)"] / multi,
            ">= 0.9x",
        ],  # fmt: skip
        ["RayCollector(2) vs the ceiling", fps["RayCollector(2)"], fps["RayCollector(2)"] / top,
         "-"],
        ["MultiSyncDataCollector(2) vs the ceiling", multi, multi / top, "-"],
        ["RayCollector(2), Ray calls (channel='ray'; other nodes' path)", ray2, ray2 / sync,
         "-"],
        ["RayCollector(2), Ray calls vs MultiSync(2)", ray2, ray2 / multi, "-"],
        ["Ray cost per batch (ms, weights out + batch back, same-node channel)", cost, "-",
         "<= 1 ms"],
        ["  same, Ray calls (channel='ray', packed buffers)", ray_cost, ray_cost / cost, "-"],
        ["  same, previous transport (TensorDicts pickled, weights ray.put)", costs["old"],
         costs["old"] / cost, "-"],
        ["  a bare actor call (the Ray-call path's floor on this machine, ms)", costs["floor"],
         costs["floor"] / cost, "-"],
    ]  # fmt: skip
    for n in (1, 2):
        rows += [
            [f"N={n}: measured frames/s of the model's rounds", round_fps[n], "-", "-"],
            [f"N={n}: scaling model (frames/s) vs those rounds", model[n],
             model[n] / round_fps[n], "0.8-1.25"],
            [f"N={n}: scaling model vs RayCollector({n}) above", model[n],
             model[n] / fps[f"RayCollector({n})"], "-"],
        ]  # fmt: skip
    rows += [
        [f"scaling model N={n} nodes (frames/s, t_c of N=1)", v, v / model[1], "-"]
        for n, v in nodes.items()
    ]
    write_table(
        "scheme_collection",
        "Scheme / RayCollector: collection frames/s on Pendulum-v1",
        ["case", "value", "ratio", "target"],
        rows,
        notes=(
            f"frames_per_batch={FRAMES_PER_BATCH}, {batches} batches per run, median of "
            f"{repeats} interleaved runs{' (--quick)' if quick else ''}, 1 torch thread per "
            f"process, {os.cpu_count()} CPUs, load average {load_start:.1f} at the start, "
            f"{_load():.1f} at the end.{_autogroup_note()} The ceiling: two processes, each a "
            f"SyncDataCollector as the in-process one, collecting at the same time with no "
            f"data exchanged; what 2 workers of any kind can "
            f"reach on this machine (2x SyncDataCollector on two idle cores). Ray workers at the driver's priority "
            f"(RAY_worker_niceness={os.environ['RAY_worker_niceness']}; Ray's default is 15). "
            f"RayCollector's workers on the driver's node get collect over a shared-memory "
            f"channel (channel='auto', the default: a Unix socket served by a thread in the "
            f"actor, weights and batches in memfd segments; Ray places, starts and restarts "
            f"them); 'Ray calls' rows: channel='ray', one Ray actor call per batch (the path of "
            f"workers on other nodes). "
            f"Ray's cost per batch: new weights out (packed once) and "
            f"a {len(batch)}-frame batch back, rebuilt as a TensorDict, from a worker whose "
            f"collector returns a ready batch; median of {calls} calls interleaved with the "
            f"Ray-call path, the previous transport and a bare call. Model: frames/s(N) = N * F_w / (t_c(N) + "
            f"N * o), F_w a worker's frames per batch (RayCollector(N) sync: "
            f"{FRAMES_PER_BATCH} / N), t_c(N) the slowest worker's own seconds per batch while "
            f"N run (measured: t_c(1)={t_c[1] * 1000:.1f} ms for {per_worker[1]} frames, t_c(2)="
            f"{t_c[2] * 1000:.1f} ms for {per_worker[2]}), o={cost:.2f} ms the cost per batch "
            f"on the driver (same node: the channel). 'N nodes' rows: a core per worker, each "
            f"worker a whole {per_worker[1]}-frame batch per round (as the Scheme's), t_c = "
            f"t_c(1), o={ray_cost:.2f} ms (Ray calls: workers on other nodes; network time not "
            f"included); the ceiling is F_w / o = {per_worker[1] / max(o_ray, 1e-9):,.0f} "
            f"frames/s."
        ),
    )
    return fps


def _ppo_factories():
    from torchrl_lite.agent.actors import OnPolicyActor
    from torchrl_lite.agent.algos import PPO
    from torchrl_lite.agent.env import VecEnv
    from torchrl_lite.agent.storages import GAEBuffer
    from torchrl_lite.envs import gym_train_env_factory
    from torchrl_lite.recipes import ppo

    cfg = ppo.Config()
    envs, action_space, obs_space = VecEnv.create_factory(
        env_fn=gym_train_env_factory, env_kwargs={"env_id": ENV_ID}, vec_env_size=cfg.num_envs
    )
    return {
        "algo_factory": PPO.create_factory(),
        "actor_factory": OnPolicyActor.create_factory(obs_space, action_space),
        "storage_factory": GAEBuffer.create_factory(size=cfg.frames_per_batch // cfg.num_envs),
        "train_envs_factory": envs,
    }


def learn(layout, seed: int, max_frames: int) -> dict:
    from torchrl_lite import Learner
    from torchrl_lite.scheme import Scheme

    name, col, col_mode, grad, grad_mode = layout
    start = time.perf_counter()
    scheme = Scheme(**_ppo_factories(), col_remote_workers=col, col_communication=col_mode,
                    grad_remote_workers=grad, grad_communication=grad_mode, seed=seed)  # fmt: skip
    startup = time.perf_counter() - start
    learner = Learner(scheme, target_steps=max_frames, logger=None)
    returns, solved = [], None
    start = time.perf_counter()
    while not learner.done():
        returns += learner.step()["returns"]
        if len(returns) >= 10 and statistics.fmean(returns[-10:]) >= -200:
            solved = learner.frames
            break
    seconds = time.perf_counter() - start
    learner.close()
    return {"layout": name, "seed": seed, "startup_s": startup, "frames": solved,
            "seconds": seconds, "last10": statistics.fmean(returns[-10:])}  # fmt: skip


LEARNING_HEADER = ["layout", "seed", "frames", "seconds", "start-up s", "last-10 return",
                   "frame cap", "load avg"]  # fmt: skip


def saved_learning_rows() -> list[list[str]]:
    """The rows of ``results/scheme_learning.md`` (its per-seed table), as text cells, so
    that a run of some seeds adds to the others'. Rows of the older 6-column table get
    their cap and load from its note."""
    path = RESULTS_DIR / "scheme_learning.md"
    if not path.exists():
        return []
    text = path.read_text()
    cap = re.search(r"cap (\d+) frames", text)
    load = re.search(r"load average (\d+(?:\.\d+)?)", text)
    rows, table = [], None
    for line in text.splitlines():
        if line.startswith("| layout | seed |"):
            table = line
        elif table and line.startswith("|") and not line.startswith("|---"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if len(cells) == 6:
                cells += [cap.group(1) if cap else "?", load.group(1) if load else "?"]
            rows.append(cells)
        elif table and not line.strip():
            table = None if rows else table
            if rows:
                break
    return rows


def learning_summary(rows: list[list[str]]) -> list[list]:
    """Per layout: seeds, median and worst frames to -200 (a seed that did not reach it
    counts as worst) and median and worst seconds of those that did."""
    out = []
    for layout in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == layout]
        reached = [r for r in mine if not r[2].startswith(">")]
        frames = sorted(int(r[2]) for r in reached)
        seconds = sorted(float(r[3]) for r in reached)
        missed = len(mine) - len(reached)
        out.append([
            layout, len(mine), f"{len(reached)}/{len(mine)}",
            statistics.median(frames) if frames and not missed else "-",
            f"not reached (cap {max(int(r[6]) for r in mine if r[2].startswith('>'))})"
            if missed
            else max(frames),
            statistics.median(seconds) if seconds and not missed else "-",
            "-" if missed else max(seconds),
        ])  # fmt: skip
    return out


def learning(seeds, max_frames: int, layouts=None) -> None:
    import ray

    ray.init(address="local", num_cpus=max(2, os.cpu_count() or 2), include_dashboard=False,
             object_store_memory=200 * 1024**2)  # fmt: skip
    new = []
    for layout in [lay for lay in LAYOUTS if layouts is None or lay[0] in layouts]:
        for seed in seeds:
            load = _load()
            r = learn(layout, seed, max_frames)
            print(r, flush=True)
            new.append([r["layout"], str(r["seed"]), str(r["frames"] or f"> {max_frames}"),
                        f"{r['seconds']:.3g}", f"{r['startup_s']:.3g}", f"{r['last10']:.0f}",
                        str(max_frames), f"{max(load, _load()):.1f}"])  # fmt: skip
    ray.shutdown()
    done = {(r[0], r[1]) for r in new}
    order = [lay[0] for lay in LAYOUTS]
    rows = [r for r in saved_learning_rows() if (r[0], r[1]) not in done] + new
    rows.sort(key=lambda r: (order.index(r[0]) if r[0] in order else len(order), int(r[1])))
    summary = learning_summary(rows)
    per_seed = "\n".join(
        ["| " + " | ".join(LEARNING_HEADER) + " |", "|" + "---|" * len(LEARNING_HEADER)]
        + ["| " + " | ".join(r) + " |" for r in rows]
    )
    write_table(
        "scheme_learning",
        "Scheme: PPO on Pendulum-v1 to -200 (mean of the last 10 episodes)",
        ["layout", "seeds", "reached", "median frames", "worst frames", "median s",
         "worst s"],
        summary,
        notes=(
            "recipe PPO values through torchrl_lite.agent; seconds of training (Scheme "
            f"start-up apart), on {os.cpu_count()} CPUs shared with other work (load average "
            "per run below): upper bounds. Frames to the first time the mean of the last 10 "
            "episode returns reached -200. Asynchronous layouts do not repeat run to run (which "
            "worker's batch comes first depends on timing). Per seed:\n\n" + per_seed
            + "\n\nSummary:"
        ),
    )  # fmt: skip


def main(argv=None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("part", nargs="?", default="all",
                        choices=["collection", "learning", "all", "halfcheetah",
                                 "scaling"])  # fmt: skip
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2])
    parser.add_argument("--max-frames", type=int, default=20_000 if smoke() else 150_000)
    parser.add_argument("--layouts", nargs="*", default=None, help='e.g. "1/1" "2x1 sync"')
    parser.add_argument("--quick", action="store_true",
                        help="collection: 5 runs of 3 batches, 30 cost calls (about a minute)")  # fmt: skip
    args, rest = parser.parse_known_args(argv)
    if args.part == "halfcheetah":  # the seed's task, long run (not part of "all")
        import scheme_halfcheetah

        return scheme_halfcheetah.main(rest)
    if args.part == "scaling":  # worker counts up to 12: a many-core machine's run
        import scheme_scaling

        return scheme_scaling.main(rest + (["--quick"] if args.quick else []))
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.part in ("collection", "all"):
        collection(args.quick)
    if args.part in ("learning", "all"):
        learning(args.seeds, args.max_frames, args.layouts)


if __name__ == "__main__":
    main(sys.argv[1:])
