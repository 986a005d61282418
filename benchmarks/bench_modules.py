"""Module benchmarks: ProbabilisticActor forward against the same network called directly.

Run: ``python benchmarks/bench_modules.py``. The library path is a
``ProbabilisticActor`` (64x64 MLP, ``TanhNormal``, ``return_log_prob=True``) called on a
TensorDict under ``ExplorationType.RANDOM``. The floor is the same network called on the
tensor, then a hand-built ``torch.distributions`` tanh-normal
(``Independent(TransformedDistribution(Normal, TanhTransform))``): ``rsample`` and
``log_prob``. A second floor calls the same network and ``TanhNormal`` directly, which
isolates the TensorDict-module overhead. All timings come from this run; targets: at
most 1.5x the floor at batch 1 and 1.1x at batch 1000.
"""

from __future__ import annotations

import statistics

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import distributions as D
from torch import nn

from _common import smoke, timeit, write_table
from torchrl_lite.modules import (
    ExplorationType,
    ProbabilisticActor,
    TanhNormal,
    set_exploration_type,
)

torch.set_num_threads(1)
OBS_DIM, ACTION_DIM = 8, 2
CALLS = {1: 200, 1000: 20}  # calls per timed chunk
ROUNDS = 5 if smoke() else 25
TARGETS = {1: 1.5, 1000: 1.1}


def make_net() -> nn.Module:
    """The 64x64 MLP writing ``loc`` and ``scale``."""
    return nn.Sequential(
        nn.Linear(OBS_DIM, 64),
        nn.Tanh(),
        nn.Linear(64, 64),
        nn.Tanh(),
        nn.Linear(64, 2 * ACTION_DIM),
        NormalParamExtractor(),
    )


def make_actor(net: nn.Module) -> ProbabilisticActor:
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(
        module,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )


def raw_torch(net: nn.Module, obs: torch.Tensor, calls: int) -> None:
    """The floor: the network, then a hand-built torch.distributions tanh-normal."""
    for _ in range(calls):
        loc, scale = net(obs)
        dist = D.Independent(
            D.TransformedDistribution(D.Normal(loc, scale), [D.TanhTransform(cache_size=1)]), 1
        )
        action = dist.rsample()
        dist.log_prob(action)


def raw_same_dist(net: nn.Module, obs: torch.Tensor, calls: int) -> None:
    """The network, then TanhNormal called directly (no TensorDict)."""
    for _ in range(calls):
        loc, scale = net(obs)
        dist = TanhNormal(loc, scale)
        action = dist.rsample()
        dist.log_prob(action)


def lib_actor(actor: ProbabilisticActor, td: TensorDict, calls: int) -> None:
    with set_exploration_type(ExplorationType.RANDOM):
        for _ in range(calls):
            actor(td)


def paired(fns: dict, calls: int, rounds: int) -> dict:
    """Per-call seconds of each function: the median over rounds, each round timing every
    function back to back (so load from other processes hits all of them alike)."""
    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(timeit(lambda fn=fn: fn(calls), repeats=3, warmup=0) / calls)
    return {name: statistics.median(ts) for name, ts in times.items()}


def rows() -> list[list]:
    torch.manual_seed(0)
    net = make_net()
    actor = make_actor(net)
    out = []
    for grad in (False, True):
        for batch, calls in CALLS.items():
            obs = torch.randn(batch, OBS_DIM)
            td = TensorDict(observation=obs, batch_size=[batch])
            with torch.set_grad_enabled(grad):
                lib_actor(actor, td, 10)  # warm up, and check the output
                if td["sample_log_prob"].shape != (batch,):
                    raise RuntimeError(f"unexpected log-prob shape {td['sample_log_prob'].shape}")
                t = paired(
                    {
                        "floor": lambda c, obs=obs: raw_torch(net, obs, c),
                        "same": lambda c, obs=obs: raw_same_dist(net, obs, c),
                        "lib": lambda c, td=td: lib_actor(actor, td, c),
                    },
                    calls,
                    ROUNDS,
                )
            out.append(
                [
                    f"batch {batch}, grad {'on' if grad else 'off'}",
                    t["floor"] * 1e6,
                    t["same"] * 1e6,
                    t["lib"] * 1e6,
                    t["lib"] / t["floor"],
                    t["lib"] / t["same"],
                    f"<= {TARGETS[batch]}",
                ]
            )
    return out


def main() -> None:
    write_table(
        "modules",
        "ProbabilisticActor forward (64x64 MLP, TanhNormal, return_log_prob)",
        [
            "case",
            "torch floor (us/call)",
            "net + TanhNormal (us/call)",
            "ProbabilisticActor (us/call)",
            "ratio vs torch floor",
            "ratio vs net + TanhNormal",
            "target",
        ],
        rows(),
        notes=(
            "Floor: the same network on the tensor, then a hand-built torch.distributions "
            "tanh-normal (rsample + log_prob). One thread; per-call medians over rounds that time the three back to back."
        ),
    )


if __name__ == "__main__":
    main()
