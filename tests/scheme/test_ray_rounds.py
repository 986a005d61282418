"""Synchronous Ray runs repeat from a fixed seed; synchronous collection with preemption thresholds (a round ends once a fraction of the
workers has delivered, the others returning what they hold, at least a fraction of their
batch), and the resource check against what is free in a shared Ray session."""

import pytest
import torch

from tests.scheme import doubles
from torchrl_lite import Learner
from torchrl_lite.scheme import Scheme

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the distributed tests need ray")


def test_preempted_round_takes_the_fast_worker_batch_and_a_fraction_of_the_slow_one(
    ray_session,
):
    """2 workers x 2 envs x 20 steps in 4 chunks of 5 steps; worker 1 sleeps 0.25 s per
    step (a full batch: 4 s). With col_fraction_workers=0.5 the round ends once worker 0
    has delivered its 2 x 20 = 40 frames; worker 1 is preempted and must first hold
    ceil(0.75 * 4) = 3 chunks: 2 x 15 = 30 frames. The round: 40 + 30 = 70 frames."""
    factories = {
        **doubles.factories(),
        "train_envs_factory": doubles.make_slow_envs_factory(1, 0.2),
    }
    scheme = Scheme(**factories, col_remote_workers=2, col_fraction_workers=0.5,
                    col_fraction_samples=0.75, col_preemption_chunks=4, seed=1)  # fmt: skip
    try:
        results = scheme.local.collection.collect(scheme.local._current_weights, 0)
        (fast, fast_meta), (slow, slow_meta) = results  # in worker order
        assert list(fast.batch_size) == [2, 20] and not fast_meta["preempted"]
        assert list(slow.batch_size) == [2, 15] and slow_meta["preempted"]
        assert fast_meta["frames"] + slow_meta["frames"] == 70
        # the preempted worker's next round is whole again when nobody preempts it
        learner = Learner(scheme, target_steps=10_000)
        info = learner.step()
        assert info["frames"] == 70  # the same thresholds in the Learner's rounds
    finally:
        scheme.shutdown()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"col_fraction_samples": 0.0}, r"col_fraction_samples=0.0 must be a fraction in \(0, 1\]"),
        ({"col_fraction_samples": 1.5}, r"col_fraction_samples=1.5 must be a fraction in \(0, 1\]"),
        ({"col_fraction_workers": 2}, r"col_fraction_workers=2 must be a fraction in \(0, 1\]"),
        ({"col_preemption_chunks": 0}, "col_preemption_chunks=0 must be >= 1"),
    ],
)  # fmt: skip
def test_preemption_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Scheme(**doubles.factories(), **kwargs)


def test_preemption_chunks_not_dividing_the_batch(ray_session):
    """20 steps per batch cannot be cut in 3 chunks: an error before any worker starts."""
    with pytest.raises(ValueError, match=r"steps_per_collection=20 is not divisible by the "
                       r"preemption chunks \(3\)"):  # fmt: skip
        Scheme(**doubles.factories(), col_remote_workers=2, col_fraction_workers=0.5,
               col_preemption_chunks=3)  # fmt: skip


def _sync_run(seed, steps=6):
    learner = Learner(Scheme(**doubles.factories(), col_remote_workers=2, seed=seed), 10_000)
    try:
        returns = []
        for _ in range(steps):  # 1.5 rounds of 2 x 40 frames, 4 updates a round
            returns += learner.step()["returns"]
        return learner.scheme.get_weights(), learner.frames, returns
    finally:
        learner.close()


# two Scheme start-ups (4 worker processes): `make test-all`; the fast suite covers the same
# property through test_ray.py's equality with a seeded local loop
@pytest.mark.slow
def test_sync_ray_runs_are_reproducible_with_a_fixed_seed(ray_session):
    """Two runs of 2 synchronous collection workers from seed 5 (new worker processes each
    time) give the same weights, frames and episode returns, bit for bit."""
    (w1, f1, r1), (w2, f2, r2) = _sync_run(5), _sync_run(5)
    assert f1 == f2 == 160 and r1 == r2
    assert w1.keys() == w2.keys() and all(torch.equal(w1[k], w2[k]) for k in w1)
