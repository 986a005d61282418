"""The 1/1 Scheme (in-process, no Ray) and the Learner: equal to a hand-written loop,
logs, saved models, exact resume, parameters, bad input."""

import csv
import sys

import pytest
import torch

from tests.scheme import doubles
from torchrl_lite import Learner
from torchrl_lite.scheme import Scheme


def _equal_weights(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_scheme_local_equals_hand_loop():
    weights, losses = doubles.hand_loop(seed=3, rounds=3)
    scheme = Scheme(**doubles.factories(), seed=3)
    got = [scheme.step()["algo"]["loss"] for _ in range(len(losses))]
    assert got == losses  # step for step
    assert _equal_weights(scheme.get_weights(), weights)
    assert scheme.version == len(losses)


def test_scheme_local_does_not_import_ray(monkeypatch):
    for name in [m for m in sys.modules if m == "ray" or m.startswith("ray.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "ray", None)  # any `import ray` now raises ImportError
    learner = Learner(Scheme(**doubles.factories()), 80)
    while not learner.done():
        learner.step()
    learner.print_info()
    learner.close()


def test_learner_loop_logs_and_model(tmp_path):
    learner = Learner(Scheme(**doubles.factories()), target_steps=120, log_dir=tmp_path)
    steps = 0
    while not learner.done():
        learner.step()
        steps += 1
    line = learner.print_info()
    metrics = learner.get_metrics()
    # 40 frames per collection (2 envs x 20 steps), 4 minibatch updates per collection
    assert metrics["frames"] == 120 and steps == metrics["updates"] == 9
    assert "frames 120/120" in line and "policy lag 0/0.0/0" in line and "restarts 0" in line
    assert metrics["episodes"] == 2 and metrics["col_alive"] == 1
    rows = list(csv.DictReader(open(tmp_path / "logs" / "metrics.csv")))
    assert [int(r["step"]) for r in rows] == [40, 80, 120]  # one row per collection
    path = learner.save_model()
    assert path == str(tmp_path / "actor_critic.state_dict")
    actor = doubles.make_actor_factory(restart_model=path)("cpu")
    assert _equal_weights(actor.state_dict(), learner.scheme.get_weights())
    learner.close()


def test_learner_episode_returns_reach_metrics():
    # episodes are truncated at 50 steps: 2 envs x 100 steps = 4 episodes
    learner = Learner(Scheme(**doubles.factories(size=100)), target_steps=200)
    while not learner.done():
        learner.step()
    m = learner.get_metrics()
    assert m["episodes"] == 4 and m["episode_return"] < 0
    learner.close()


def test_learner_checkpoint_resumes_exactly(tmp_path):
    def run(n):
        learner = Learner(Scheme(**doubles.factories(), seed=5), 10_000, log_dir=None)
        for _ in range(n):
            learner.step()
        return learner

    reference = run(11)
    first = run(6)  # in the middle of a pass over the storage (4 minibatches per pass)
    first.save_checkpoint(tmp_path / "ckpt")
    first.close()
    resumed = Learner(Scheme(**doubles.factories(), seed=5), 10_000)
    resumed.load_checkpoint(tmp_path / "ckpt")
    assert resumed.frames == first.frames and resumed.updates == 6
    for _ in range(5):
        resumed.step()
    assert _equal_weights(resumed.scheme.get_weights(), reference.scheme.get_weights())
    assert resumed.frames == reference.frames


def test_learner_update_algorithm_parameter():
    learner = Learner(Scheme(**doubles.factories()), 100)
    learner.update_algorithm_parameter("lr", 0.5)
    assert learner.scheme.local.algo.optimizer.param_groups[0]["lr"] == 0.5
    with pytest.raises(ValueError, match="unknown algorithm parameter 'lrr'"):
        learner.update_algorithm_parameter("lrr", 0.5)


def test_learner_save_model_needs_a_path():
    learner = Learner(Scheme(**doubles.factories()), 100)
    with pytest.raises(ValueError, match="no log_dir: pass a path"):
        learner.save_model()


def test_learner_rejects_a_trainer_checkpoint(tmp_path):
    from torchrl_lite.trainers.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / "c", {"loss_module": {}})
    learner = Learner(Scheme(**doubles.factories()), 100)
    with pytest.raises(ValueError, match="trainer checkpoint, not a Learner's"):
        learner.load_checkpoint(tmp_path / "c")


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"col_communication": "synchronus"}, ValueError,
         r"col_communication='synchronus' is not a communication mode; valid: \['synchronous', "
         r"'asynchronous'\]. Did you mean 'synchronous'\?"),
        ({"grad_communication": "async"}, ValueError, "grad_communication='async' is not a"),
        ({"col_remote_workers": 0}, ValueError, "col_remote_workers=0 must be >= 1"),
        ({"grad_remote_workers": -1}, ValueError, "grad_remote_workers=-1 must be >= 1"),
        ({"col_remote_workers": 1.5}, TypeError, "col_remote_workers must be an int >= 1, got 1.5"),
        ({"col_fraction_workers": 0.0}, ValueError, r"col_fraction_workers=0.0 must be a fraction"),
        ({"col_remote_workers": 2, "col_communication": "asynchronous",
          "col_fraction_workers": 0.5}, ValueError, "preemption"),
        ({"decentralized_update": True}, ValueError, "decentralized_update=True needs"),
        ({"algo_factory": None}, TypeError, "algo_factory must be a callable"),
    ],
)  # fmt: skip
def test_scheme_bad_input(kwargs, error, message):
    with pytest.raises(error, match=message):
        Scheme(**{**doubles.factories(), **kwargs})


def test_learner_bad_target_steps():
    with pytest.raises(ValueError, match="target_steps must be an int >= 1, got -3"):
        Learner(Scheme(**doubles.factories()), -3)


def test_learner_ctrl_c_stops_every_worker(monkeypatch):
    scheme = Scheme(**doubles.factories())
    learner = Learner(scheme, 1000)
    learner.step()

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(scheme, "step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        learner.step()
    assert scheme._closed and scheme.local.collection.worker.collector.closed
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match=r"Scheme.step\(\) after shutdown\(\)"):
        scheme.step()
