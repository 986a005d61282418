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
CALLS = {1: 500 if smoke() else 3000, 1000: 50 if smoke() else 300}
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
                lib_actor(actor, td, 1)
                assert td["sample_log_prob"].shape == (batch,)
                floor = timeit(lambda obs=obs, c=calls: raw_torch(net, obs, c), repeats=7)
                same = timeit(lambda obs=obs, c=calls: raw_same_dist(net, obs, c), repeats=7)
                lib = timeit(lambda td=td, c=calls: lib_actor(actor, td, c), repeats=7)
            us = 1e6 / calls
            out.append(
                [
                    f"batch {batch}, grad {'on' if grad else 'off'}",
                    floor * us,
                    same * us,
                    lib * us,
                    lib / floor,
                    lib / same,
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
            "tanh-normal (rsample + log_prob). One thread; medians of 7 runs."
        ),
    )


if __name__ == "__main__":
    main()
