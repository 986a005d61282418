"""Behaviours TorchRL's example scripts rely on past their imports: the collector's step
count (discrete IQL/CQL log episode lengths from it), CQLLoss's v0.4 output keys, batched
envs handed unstarted to multiprocess collectors (REDQ), and the offline caches that the
bandit and discrete CQL scripts read."""

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from tests.collectors.helpers import CountingEnv, constant_policy
from torchrl_lite.collectors import (
    MultiaSyncDataCollector,
    MultiSyncDataCollector,
    SyncDataCollector,
)
from torchrl_lite.data import Bounded
from torchrl_lite.envs import ParallelEnv, SerialEnv, StepCounter, TransformedEnv
from torchrl_lite.envs.libs.openml import OpenMLEnv
from torchrl_lite.envs.libs.openml_cache import (
    ADULT_COLUMNS,
    ADULT_DATA_ID,
    synthetic_adult,
    write_openml_cache,
)
from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import CQLLoss
from torchrl_lite.recipes import cql as cql_recipe


# -- max_frames_per_traj records the step count ----------------------------------------
def test_max_frames_per_traj_records_step_count_like_a_step_counter():
    # the reference: the same env under StepCounter(max_steps=4), rolled out by hand
    reference = TransformedEnv(CountingEnv(limit=100), StepCounter(max_steps=4))
    expected = reference.rollout(10, constant_policy(), break_when_any_done=False)
    collector = SyncDataCollector(
        CountingEnv(limit=100), constant_policy(), frames_per_batch=10, max_frames_per_traj=4
    )
    data = collector.next()
    for key in ["step_count", ("next", "step_count"), ("next", "done"), ("next", "truncated")]:
        assert torch.equal(data[key], expected[key]), key
    assert data["step_count"].dtype == torch.int64 and data["step_count"].shape == (10, 1)
    collector.shutdown()


def test_step_count_restarts_per_sub_env_and_runs_across_batches():
    # sub-env 0 terminates after 2 steps, sub-env 1 is cut at 3 (max_frames_per_traj)
    env = SerialEnv(2, [lambda: CountingEnv(2), lambda: CountingEnv(10)])
    collector = SyncDataCollector(
        env, constant_policy(), frames_per_batch=8, max_frames_per_traj=3, total_frames=16
    )
    first, second = list(collector)
    steps = torch.cat([first["next", "step_count"], second["next", "step_count"]], dim=1)
    assert steps[0].flatten().tolist() == [1, 2] * 4
    assert steps[1].flatten().tolist() == [1, 2, 3, 1, 2, 3, 1, 2]
    # what the scripts log: the length of each episode that ended in the batch
    ended = first["next", "step_count"][first["next", "done"]]
    assert sorted(ended.tolist()) == [2, 2, 3]


def test_no_step_count_without_max_frames_per_traj():
    collector = SyncDataCollector(CountingEnv(limit=3), constant_policy(), frames_per_batch=6)
    data = collector.next()
    assert "step_count" not in data.keys() and ("next", "step_count") not in data.keys(True)
    collector.shutdown()


def test_an_env_with_its_own_step_counter_keeps_its_count():
    # TorchRL raises here; we keep the env's count and still cut at the collector's limit
    env = TransformedEnv(CountingEnv(limit=100), StepCounter())
    collector = SyncDataCollector(env, constant_policy(), frames_per_batch=6, max_frames_per_traj=2)
    data = collector.next()
    assert data["next", "step_count"].flatten().tolist() == [1, 2, 1, 2, 1, 2]
    assert data["next", "truncated"].flatten().tolist() == [False, True] * 3
    collector.shutdown()


def test_multiprocess_workers_record_step_count():
    collector = MultiSyncDataCollector(
        [lambda: CountingEnv(limit=100)] * 2,
        constant_policy(),
        frames_per_batch=8,
        total_frames=8,
        max_frames_per_traj=3,
    )
    data = next(iter(collector))
    collector.shutdown()
    assert torch.equal(data["next", "step_count"].flatten(), data["next", "count"].flatten().long())


# -- CQLLoss returns TorchRL's behaviour-cloning actor loss ----------------------------
def _cql_parts(**kwargs):
    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(
            nn.Sequential(MLP(3, 4, depth=1), NormalParamExtractor()),
            ["observation"],
            ["loc", "scale"],
        ),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        spec=Bounded(-1.0, 1.0, shape=(2,)),
    )
    qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
    batch = TensorDict(
        observation=torch.randn(16, 3),
        action=torch.rand(16, 2) * 1.8 - 0.9,
        next=TensorDict(
            observation=torch.randn(16, 3),
            reward=torch.randn(16, 1),
            done=torch.zeros(16, 1, dtype=torch.bool),
            terminated=torch.zeros(16, 1, dtype=torch.bool),
            batch_size=[16],
        ),
        batch_size=[16],
    )
    return actor, CQLLoss(actor, qvalue, **kwargs), batch


@pytest.mark.parametrize("with_lagrange", [False, True])
def test_cql_loss_returns_the_behaviour_cloning_actor_loss(with_lagrange):
    actor, loss, batch = _cql_parts(with_lagrange=with_lagrange, alpha_init=0.3)
    out = loss(batch)
    assert "loss_actor_bc" in loss.out_keys and "loss_actor_bc" in out.keys()
    # mean(alpha * log pi(a|s)) is -alpha * entropy; the cloning term is the data's log-prob
    with torch.no_grad():
        data_log_prob = actor.get_dist(batch.clone()).log_prob(batch["action"])
    expected = -out["alpha"] * out["entropy"] - data_log_prob.mean()
    torch.testing.assert_close(out["loss_actor_bc"].detach(), expected, rtol=1e-5, atol=1e-5)
    # the v0.4 script steps the actor on it alone: it reaches the actor, not the Q-nets
    out["loss_actor_bc"].backward()
    assert all(p.grad is not None for p in actor.parameters())
    assert all(p.grad is None for p in loss.qvalue_network_params.values(True, True))


def test_cql_recipe_optimises_the_terms_it_always_did():
    _, loss, batch = _cql_parts()
    summed = [k for k in loss(batch).keys() if k.startswith("loss_") and k != "loss_actor_bc"]
    assert list(cql_recipe.LOSS_TERMS) == summed


# -- batched envs inside multiprocess collectors (REDQ) ---------------------------------
def _parallel_counters():
    return ParallelEnv(2, lambda: CountingEnv(limit=100))


def _check_counts(data):
    count, next_count = data["count"], data["next", "count"]
    assert torch.equal(next_count, count + 1)  # every copy stepped once per recorded step


def test_multiprocess_collector_runs_parallel_env_constructors():
    # each collector worker runs a ParallelEnv of its own (worker processes of a worker)
    collector = MultiSyncDataCollector(
        [_parallel_counters] * 2, constant_policy(), frames_per_batch=16, total_frames=32
    )
    batches = list(collector)
    collector.shutdown()
    assert [b.batch_size for b in batches] == [torch.Size([2, 2, 4])] * 2  # workers, envs, T
    for data in batches:
        _check_counts(data)


def test_a_started_parallel_env_instance_is_shipped_unstarted_and_restarts():
    # TorchRL's REDQ script hands TransformedEnv(ParallelEnv(...)) itself to the collector
    env = TransformedEnv(_parallel_counters(), StepCounter(max_steps=3))
    assert env.base_env.worker_pids  # ours start at construction
    with pytest.warns(UserWarning, match="same env instance"):
        collector = MultiaSyncDataCollector(
            [env, env], constant_policy(), frames_per_batch=6, total_frames=24
        )
    assert env.is_closed  # stopped here: each collector worker started its own copy
    for data in collector:
        assert data.batch_size == torch.Size([2, 3])
        assert data["next", "step_count"][0].flatten().tolist() == [1, 2, 3]
        _check_counts(data)
    collector.shutdown()
    assert env.rollout(2, constant_policy()).batch_size == torch.Size([2, 2])  # restarted
    env.close()


def test_transformed_env_start_reopens_its_base_env():
    env = TransformedEnv(_parallel_counters(), StepCounter())
    env.close()
    env.start()
    assert not env.is_closed and not env.base_env.is_closed
    assert env.reset()["step_count"].flatten().tolist() == [0, 0]
    env.close()


def test_transformed_env_start_error_names_the_base_env():
    class NoRestart(CountingEnv):
        pass

    env = TransformedEnv(NoRestart(), StepCounter())
    env.close()
    with pytest.raises(RuntimeError, match="base env NoRestart cannot start again"):
        env.start()


_EXIT_SCRIPT = """
import os, sys
from tests.collectors.helpers import CountingEnv, constant_policy
from torchrl_lite.collectors import MultiSyncDataCollector
from torchrl_lite.envs import ParallelEnv

def make():
    return ParallelEnv(2, lambda: CountingEnv(limit=100))

if __name__ == "__main__":
    collector = MultiSyncDataCollector([make] * 2, constant_policy(), frames_per_batch=8)
    next(iter(collector))
    print(" ".join(str(p.pid) for p in collector._procs), flush=True)
    if sys.argv[1] == "raise":
        raise ValueError("boom")
"""


@pytest.mark.parametrize("how", ["end", "raise"])
def test_script_with_nested_workers_exits_without_shutdown(tmp_path, how):
    # collector workers are not daemonic (they start processes); the collector's
    # finalizer still stops them when a script ends without shutdown()
    script = tmp_path / "script.py"
    script.write_text(_EXIT_SCRIPT)
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, str(script), how],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert time.monotonic() - start < 60
    assert (out.returncode == 0) == (how == "end"), out.stderr[-2000:]
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2
    time.sleep(0.5)
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


# -- OpenMLEnv from scikit-learn's OpenML cache (bandits/dqn), never downloading ---------
@pytest.fixture
def adult_cache(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))
    table = synthetic_adult(600, seed=1)
    write_openml_cache(
        "adult", table, ADULT_COLUMNS, target="class", data_id=ADULT_DATA_ID, note="test"
    )
    return table


def _complete_rows(table):
    keep = [i for i in range(len(table["age"])) if all(v[i] is not None for v in table.values())]
    return {column: [values[i] for i in keep] for column, values in table.items()}


def test_openml_env_predicts_adult_occupation_as_torchrl_does(adult_cache):
    rows = _complete_rows(adult_cache)
    env = OpenMLEnv("adult_num", batch_size=[8])
    # classes: the occupations of the rows without missing values, in sorted order
    names = sorted(set(rows["occupation"]))
    expected = torch.tensor([names.index(v) for v in rows["occupation"]])
    assert torch.equal(env.labels, expected)
    assert env.action_spec.n == len(names)
    # 13 features (14 columns less the target and the occupation), each standardised
    assert env.features.shape == (len(expected), 13)
    age = torch.tensor(rows["age"], dtype=torch.float64)
    torch.testing.assert_close(
        env.features[:, 0].double(), (age - age.mean()) / age.std(correction=0), atol=1e-5, rtol=0
    )
    td = env.reset()
    assert td["observation"].shape == (8, 13) and td["y"].shape == (8,)


def test_openml_env_onehot_columns(adult_cache):
    rows = _complete_rows(adult_cache)
    categorical = [c for c, v in ADULT_COLUMNS.items() if v and c not in ("occupation", "class")]
    numeric = [c for c, v in ADULT_COLUMNS.items() if v is None]
    width = len(numeric) + sum(len(set(rows[c])) for c in categorical)
    env = OpenMLEnv("adult_onehot", batch_size=[4])
    assert env.features.shape[1] == width
    onehot = env.features[:, len(numeric) :]
    assert torch.equal(onehot.sum(1), torch.full((onehot.shape[0],), float(len(categorical))))


def test_openml_env_names_the_missing_cache_file(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    monkeypatch.setenv("SCIKIT_LEARN_DATA", str(tmp_path))
    with pytest.raises(
        FileNotFoundError, match="data_version/1.gz is missing.*nothing is downloaded"
    ):
        OpenMLEnv("adult_onehot")
    write_openml_cache(
        "adult", synthetic_adult(50), ADULT_COLUMNS, target="class", data_id=ADULT_DATA_ID
    )
    (tmp_path / "openml/openml.org/api/v1/json/data/features/1590.gz").unlink()
    with pytest.raises(FileNotFoundError, match="features/1590.gz is missing"):
        OpenMLEnv("adult_num")


def test_write_openml_cache_bad_tables(tmp_path):
    with pytest.raises(ValueError, match="target 'label' is not a column of \\['a'\\]"):
        write_openml_cache("t", {"a": [1]}, {}, target="label", data_id=1, data_home=tmp_path)
    with pytest.raises(ValueError, match="different lengths"):
        write_openml_cache(
            "t", {"a": [1], "b": [1, 2]}, {}, target="b", data_id=1, data_home=tmp_path
        )


def test_insert_transform_returns_the_env_for_reassignment():
    # current TorchRL's discrete CQL script: eval_env = eval_env.insert_transform(0, t)
    env = TransformedEnv(CountingEnv(limit=100), StepCounter())
    same = env.insert_transform(0, StepCounter(max_steps=2, step_count_key="inner_count"))
    assert same is env
    assert [type(t).__name__ for t in env.transform] == ["StepCounter", "StepCounter"]
    rollout = env.rollout(4, constant_policy())
    assert rollout["next", "inner_count"].flatten().tolist() == [1, 2]  # truncated at 2
