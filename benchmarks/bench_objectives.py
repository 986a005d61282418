"""Objective benchmarks: (a) loop-free value estimators against their plain-loop versions,
(b) losses against hand-written plain PyTorch versions of the same maths.

Run: ``python benchmarks/bench_objectives.py`` (``make bench`` runs every benchmark). Every
ratio compares two computations measured in this run on this machine.
"""

from __future__ import annotations

import torch

from _common import smoke, timeit, write_table
from torchrl_lite.objectives.value.functional import (
    generalized_advantage_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td_lambda_return_estimate,
)

torch.set_num_threads(1)


# -- (a) value estimators -----------------------------------------------------------------
def estimator_rows() -> list[list]:
    """Vectorized estimators vs the plain loops on ``[16, 1000, 1]`` (target: >= 5x)."""
    B, T = (16, 200) if smoke() else (16, 1000)
    g = torch.Generator().manual_seed(0)
    shape = (B, T, 1)
    value, next_value, reward = (torch.randn(shape, generator=g) for _ in range(3))
    u = torch.rand(shape, generator=g)
    terminated = u < 0.005
    done = u < 0.01  # terminated or truncated
    gamma, lmbda = 0.99, 0.95
    cases = [
        (
            "generalized_advantage_estimate",
            lambda: generalized_advantage_estimate(
                gamma, lmbda, value, next_value, reward, done, terminated
            ),
            lambda: vec_generalized_advantage_estimate(
                gamma, lmbda, value, next_value, reward, done, terminated
            ),
        ),
        (
            "td_lambda_return_estimate",
            lambda: td_lambda_return_estimate(gamma, lmbda, next_value, reward, done, terminated),
            lambda: vec_td_lambda_return_estimate(
                gamma, lmbda, next_value, reward, done, terminated
            ),
        ),
    ]
    rows = []
    for name, loop_fn, vec_fn in cases:
        loop = timeit(loop_fn, repeats=5)
        vec = timeit(vec_fn, repeats=20)
        rows.append([f"{name} [{B}, {T}, 1]", loop * 1e3, vec * 1e3, loop / vec])
    return rows


# -- (b) losses ---------------------------------------------------------------------------
# (added with the loss modules: a ``loss_rows()`` function and its table in ``main``)


def main() -> None:
    write_table(
        "objectives_estimators",
        "Value estimators: loop-free vs plain loop over time",
        ["function", "loop (ms)", "vec_ (ms)", "speed-up"],
        estimator_rows(),
        notes=(
            "gamma=0.99, lmbda=0.95, ~1% of steps done (half of them terminated); "
            "median of 5 (loop) / 20 (vec) runs, 1 torch thread. Target speed-up >= 5."
        ),
    )


if __name__ == "__main__":
    main()
