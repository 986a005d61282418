"""SerialEnv and ParallelEnv: same rollouts as the copies run alone, partial resets, faults."""

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.tensor_specs import Composite, Unbounded
from torchrl_lite.envs import EnvBase, GymEnv, ParallelEnv, SerialEnv, check_env_specs

BATCHED = [SerialEnv, ParallelEnv]


class CountingEnv(EnvBase):
    """``"count"``: steps since the last reset; ``"resets"``: resets so far; ``"seed"``.

    Done when ``count == limit``; the reward is the action. ``fail_at`` raises inside the
    step of that number; ``sleep`` slows each step down; ``extra`` adds an observation.
    """

    def __init__(self, limit=3, fail_at=None, sleep=0.0, extra=False):
        super().__init__()
        obs = {
            "count": Unbounded((1,), dtype=torch.int64),
            "resets": Unbounded((1,), dtype=torch.int64),
        }
        obs["seed"] = Unbounded((1,), dtype=torch.int64)
        if extra:
            obs["extra"] = Unbounded((2,))
        self.observation_spec = Composite(obs)
        self.action_spec = Unbounded((1,))
        self.limit, self.fail_at, self.sleep, self.extra = limit, fail_at, sleep, extra
        self.count, self.resets, self.steps, self.seed = 0, 0, 0, -1

    def _obs(self):
        out = {
            "count": torch.tensor([self.count]),
            "resets": torch.tensor([self.resets]),
            "seed": torch.tensor([self.seed]),
        }
        if self.extra:
            out["extra"] = torch.zeros(2)
        return out

    def _reset(self, tensordict):
        self.count, self.resets = 0, self.resets + 1
        return TensorDict(self._obs(), [])

    def _step(self, tensordict):
        self.steps += 1
        if self.fail_at is not None and self.steps == self.fail_at:
            raise ValueError(f"boom at step {self.steps}")
        if self.sleep:
            time.sleep(self.sleep)
        self.count += 1
        done = torch.tensor([self.count >= self.limit])
        out = self._obs()
        out.update(
            reward=tensordict["action"].clone(),
            done=done,
            terminated=done.clone(),
            truncated=torch.zeros(1, dtype=torch.bool),
        )
        return TensorDict(out, [])

    def _set_seed(self, seed):
        self.seed = seed


def make_cartpole():
    return GymEnv("CartPole-v1")


@pytest.fixture
def no_leftover_workers():
    before = {p.pid for p in multiprocessing.active_children()}
    yield
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert not left, f"worker processes left running: {left}"


# -- construction and specs ---------------------------------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_specs_and_check_env_specs(cls, no_leftover_workers):
    with cls(3, make_cartpole) as env:
        single = make_cartpole()
        assert env.batch_size == torch.Size([3])
        assert env.action_spec == single.action_spec.expand(3, *single.action_spec.shape)
        assert env.full_observation_spec["observation"].shape == torch.Size([3, 4])
        check_env_specs(env, seed=0)
        td = env.reset()
        assert td.batch_size == torch.Size([3]) and td.device == torch.device("cpu")


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_of_batched_envs(cls, no_leftover_workers):
    with cls(2, lambda: GymEnv("CartPole-v1", num_envs=3)) as env:
        assert env.batch_size == torch.Size([2, 3])
        check_env_specs(env, seed=0)


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_single_copy(cls, no_leftover_workers):
    with cls(1, make_cartpole) as env:
        assert env.rollout(5, break_when_any_done=False).batch_size == torch.Size([1, 5])


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_explicit_device(cls, no_leftover_workers):
    with cls(2, make_cartpole, device="cpu") as env:
        td = env.rollout(3)
        assert td.device == torch.device("cpu") and env.action_spec.device == torch.device("cpu")


def test_parallel_env_seed_snippet(no_leftover_workers):
    env_parallel = ParallelEnv(4, lambda: GymEnv("Pendulum-v1", from_pixels=True))
    td = env_parallel.rollout(max_steps=20, policy=None)
    assert td.shape == torch.Size([4, 20])
    assert env_parallel.action_spec.is_in(td["action"])
    assert td["pixels"].dtype == torch.uint8 and td["next", "pixels"].shape[:2] == torch.Size(
        [4, 20]
    )
    env_parallel.close()


# -- same rollouts ----------------------------------------------------------------------
def _rollout(env, seed, steps, torch_seed=7):
    env.set_seed(seed)
    torch.manual_seed(torch_seed)
    return env.rollout(steps, break_when_any_done=False)


def test_batched_env_serial_and_parallel_rollouts_identical(no_leftover_workers):
    with SerialEnv(4, make_cartpole) as serial, ParallelEnv(4, make_cartpole) as parallel:
        a, b = _rollout(serial, 3, 60), _rollout(parallel, 3, 60)
    assert a["next", "done"].any(), "the rollout should cross episode ends"
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key
    with ParallelEnv(4, make_cartpole, num_processes=2) as grouped:
        c = _rollout(grouped, 3, 60)
    for key in a.keys(True, True):
        assert torch.equal(a[key], c[key]), key


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_matches_single_envs_run_alone(cls, no_leftover_workers):
    seed, steps = 11, 60
    with cls(3, make_cartpole) as env:
        td = _rollout(env, seed, steps)
    for i in range(3):
        single = make_cartpole()
        single.set_seed(seed + i)
        root = single.reset()
        for t in range(steps):
            assert torch.equal(root["observation"], td["observation"][i, t]), (i, t)
            root["action"] = td["action"][i, t]
            out = single.step(root)
            for key in ("observation", "reward", "done", "terminated"):
                assert torch.equal(out["next", key], td["next", key][i, t]), (key, i, t)
            root = single.reset() if bool(out["next", "done"]) else out["next"].exclude("reward")


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_of_vector_envs_matches_single_envs(cls, no_leftover_workers):
    # copy i is a 3-env gymnasium vector env seeded seed + 3 * i
    with cls(2, lambda: GymEnv("CartPole-v1", num_envs=3)) as env:
        td = _rollout(env, 5, 40)
    with SerialEnv(6, make_cartpole) as flat:
        ref = _rollout(flat, 5, 40)
    assert ref["next", "done"].any()
    for key in ref.keys(True, True):
        assert torch.equal(td[key].reshape(ref[key].shape), ref[key]), key


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_set_seed_gives_each_copy_its_seed(cls, no_leftover_workers):
    with cls(3, CountingEnv) as env:
        assert env.set_seed(100) == 103
        td = env.reset()
    assert td["seed"].flatten().tolist() == [100, 101, 102]


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_actions_reach_their_copy(cls, no_leftover_workers):
    with cls(3, CountingEnv) as env:
        td = env.reset()
        td["action"] = torch.tensor([[0.5], [1.5], [2.5]])
        out = env.step(td)
    assert out["next", "reward"].flatten().tolist() == [0.5, 1.5, 2.5]


# -- partial resets ---------------------------------------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_partial_resets_only_reset_done_copies(cls, no_leftover_workers):
    kwargs = [{"limit": 2}, {"limit": 3}, {"limit": 5}]
    with cls(3, CountingEnv, create_env_kwargs=kwargs) as env:
        td = env.rollout(12, break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)  # [3, T]
    for i, limit in enumerate((2, 3, 5)):
        expected_count = [(t % limit) + 1 for t in range(12)]
        assert td["next", "count"][i].flatten().tolist() == expected_count
        # a copy's reset counter moves only after its own episode ends
        resets_before = 1 + torch.cat([torch.zeros(1), done[i, :-1].cumsum(0).float()])
        assert td["resets"][i].flatten().tolist() == resets_before.long().tolist()


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_step_and_maybe_reset(cls, no_leftover_workers):
    kwargs = [{"limit": 1}, {"limit": 4}]
    with cls(2, CountingEnv, create_env_kwargs=kwargs) as env:
        root = env.rand_action(env.reset())
        stepped, root = env.step_and_maybe_reset(root)
        assert stepped["next", "done"].flatten().tolist() == [True, False]
        assert root["count"].flatten().tolist() == [0, 1]
        assert root["resets"].flatten().tolist() == [2, 1]
        assert "_reset" not in root.keys()


def test_batched_env_step_and_maybe_reset_loops_identical(no_leftover_workers):
    # ParallelEnv fuses the step and the reset of done copies into one message per worker
    def loop(env):
        env.set_seed(2)
        torch.manual_seed(0)
        root, steps = env.reset(), []
        for _ in range(60):
            stepped, root = env.step_and_maybe_reset(env.rand_action(root))
            steps.append((stepped.clone(), root.clone()))
        return steps

    with SerialEnv(4, make_cartpole) as serial:
        expected = loop(serial)
    for kwargs in ({}, {"num_processes": 2}):
        with ParallelEnv(4, make_cartpole, **kwargs) as parallel:
            got = loop(parallel)
        assert any(bool(s["next", "done"].any()) for s, _ in expected)
        for (s1, r1), (s2, r2) in zip(expected, got):
            for a, b in ((s1, s2), (r1, r2)):
                assert set(a.keys(True, True)) == set(b.keys(True, True))
                for key in a.keys(True, True):
                    assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_reset_with_mask(cls, no_leftover_workers):
    with cls(3, CountingEnv, create_env_kwargs={"limit": 10}) as env:
        td = env.rand_action(env.reset())
        td = env.step(td)["next"].exclude("reward")
        td["_reset"] = torch.tensor([[False], [True], [False]])
        out = env.reset(td)
    assert out["count"].flatten().tolist() == [1, 0, 1]
    assert out["resets"].flatten().tolist() == [1, 2, 1]


# -- transforms -------------------------------------------------------------------------
def _transforms():
    try:
        from torchrl_lite.envs import transforms
    except ImportError as err:  # pragma: no cover - written before the transforms landed
        pytest.skip(f"torchrl_lite.envs.transforms is not importable yet: {err}")
    return transforms


def test_parallel_env_with_transforms_inside_workers(no_leftover_workers):
    T = _transforms()

    def make():
        return T.TransformedEnv(
            GymEnv("CartPole-v1"), T.Compose(T.RewardScaling(loc=0.0, scale=2.0), T.InitTracker())
        )

    with ParallelEnv(2, make) as parallel, SerialEnv(2, make) as serial:
        check_env_specs(parallel)
        a, b = _rollout(serial, 0, 30), _rollout(parallel, 0, 30)
    assert (b["next", "reward"] == 2.0).all()
    assert b["is_init"][:, 0].all()
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


def test_parallel_env_with_step_counter_inside_workers(no_leftover_workers):
    T = _transforms()
    probe = T.TransformedEnv(CountingEnv(), T.StepCounter())
    if "step_count" not in probe.full_state_spec.keys(True, True):
        pytest.skip(
            "StepCounter does not declare 'step_count' in full_state_spec yet; batched envs "
            "send only the action and state entries to their copies"
        )
    kwargs = [{"limit": 2}, {"limit": 3}]
    with ParallelEnv(
        2,
        lambda limit: T.TransformedEnv(CountingEnv(limit), T.StepCounter()),
        create_env_kwargs=kwargs,
    ) as env:
        td = env.rollout(6, break_when_any_done=False)
    assert td["next", "step_count"].squeeze(-1).tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]


def test_transformed_parallel_env(no_leftover_workers):
    T = _transforms()
    kwargs = [{"limit": 2}, {"limit": 3}]
    env = T.TransformedEnv(
        ParallelEnv(2, CountingEnv, create_env_kwargs=kwargs),
        T.Compose(T.StepCounter(), T.RewardSum()),
    )
    try:
        check_env_specs(env)
        td = env.rollout(6, break_when_any_done=False)
    finally:
        env.close()
    assert td["next", "step_count"].squeeze(-1).tolist() == [[1, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]
    assert env.base_env.is_closed


# -- bad input --------------------------------------------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
@pytest.mark.parametrize("n", [0, -2])
def test_batched_env_bad_num_workers(cls, n):
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        cls(n, make_cartpole)
    with pytest.raises(TypeError, match="num_workers must be an int"):
        cls(2.0, make_cartpole)


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_create_env_fn_not_callable(cls):
    with pytest.raises(TypeError, match="create_env_fn must be a callable.*'CartPole-v1'"):
        cls(2, "CartPole-v1")
    live = make_cartpole()
    with pytest.raises(TypeError, match="not a live env"):
        cls(2, live)
    with pytest.raises(ValueError, match="list of 3 callables; expected one or num_workers=2"):
        cls(2, [make_cartpole] * 3)
    with pytest.raises(TypeError, match="create_env_kwargs must be a dict or a list of dicts"):
        cls(2, make_cartpole, create_env_kwargs="x")


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_copies_with_different_specs_are_stacked_lazily(cls, no_leftover_workers):
    # the data and errors of such envs are tested in test_batched_lazy.py
    with cls(2, [CountingEnv, lambda: CountingEnv(extra=True)]) as env:
        td = env.rollout(3)
    assert type(td).__name__ == "LazyStackedTensorDict"
    assert "extra" in td[1].keys() and "extra" not in td[0].keys()


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_factory_returning_a_non_env(cls, no_leftover_workers):
    expected = TypeError if cls is SerialEnv else RuntimeError
    with pytest.raises(expected, match="must return an EnvBase"):
        cls(2, lambda: "not an env")


def test_parallel_env_bad_options():
    with pytest.raises(ValueError, match="mp_start_method must be one of"):
        ParallelEnv(2, make_cartpole, mp_start_method="bogus")
    with pytest.raises(ValueError, match="num_processes must be between 1 and num_workers=2"):
        ParallelEnv(2, make_cartpole, num_processes=3)
    with pytest.raises(ValueError, match="num_sub_threads must be >= 1"):
        ParallelEnv(2, make_cartpole, num_sub_threads=0)


@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_step_before_reset_and_after_close(cls, no_leftover_workers):
    env = cls(2, CountingEnv)
    td = env.rand_action()
    with pytest.raises(RuntimeError, match="reset"):
        env.step(td)
    env.reset()
    env.close()
    with pytest.raises(RuntimeError, match="closed"):
        env.step(td)
    # as in TorchRL, reset() starts a closed batched env again (new copies)
    assert env.reset()["count"].flatten().tolist() == [0, 0] and not env.is_closed
    env.close()


# -- faults (ParallelEnv workers) ---------------------------------------------------------
def _assert_all_stopped(env):
    assert env.is_closed
    for pid in env.worker_pids:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not [p for p in multiprocessing.active_children() if p.pid in env.worker_pids]


def test_parallel_env_fault_worker_raises_in_step(no_leftover_workers):
    kwargs = [{}, {"fail_at": 3}, {}]
    env = ParallelEnv(3, CountingEnv, create_env_kwargs=kwargs)
    td = env.rand_action(env.reset())
    td = env.step_and_maybe_reset(td)[1]
    td = env.step_and_maybe_reset(env.rand_action(td))[1]
    start = time.monotonic()
    with pytest.raises(RuntimeError) as info:
        env.step(env.rand_action(td))
    assert time.monotonic() - start < 5
    message = str(info.value)
    assert "worker 1" in message and "copy 1" in message
    assert "ValueError: boom at step 3" in message
    assert "Traceback (most recent call last)" in message and "in _step" in message
    _assert_all_stopped(env)
    with pytest.raises(RuntimeError, match="closed.*raised ValueError"):
        env.step(td)


def test_parallel_env_fault_worker_raises_while_building():
    def broken():
        raise OSError("no display")

    with pytest.raises(RuntimeError, match="(?s)raised OSError: no display.*Traceback"):
        ParallelEnv(2, [CountingEnv, broken])


def test_parallel_env_fault_worker_killed_between_calls(no_leftover_workers):
    env = ParallelEnv(3, CountingEnv)
    td = env.rand_action(env.reset())
    os.kill(env.worker_pids[1], signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="worker 1 .* was killed by signal SIGKILL during step"):
        env.step(td)
    assert time.monotonic() - start < 5
    _assert_all_stopped(env)


def test_parallel_env_fault_worker_killed_during_step(no_leftover_workers):
    env = ParallelEnv(2, CountingEnv, create_env_kwargs={"sleep": 6.0})
    td = env.rand_action(env.reset())
    killer = threading.Timer(0.3, os.kill, (env.worker_pids[0], signal.SIGKILL))
    killer.start()
    start = time.monotonic()
    with pytest.raises(RuntimeError, match="killed by signal SIGKILL"):
        env.step(td)
    # not waiting for the other worker's 6 s step: 1 s of grace, then it is terminated
    assert time.monotonic() - start < 4.5
    killer.join()
    _assert_all_stopped(env)


def test_parallel_env_fault_interrupted_step_keeps_env_usable(no_leftover_workers, sigint_raises):
    env = ParallelEnv(2, CountingEnv, create_env_kwargs={"sleep": 0.5, "limit": 100})
    td = env.rand_action(env.reset())
    interrupter = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    with pytest.raises(KeyboardInterrupt):
        interrupter.start()
        env.step(td)
    interrupter.join()
    out = env.step(td.exclude("next"))  # the interrupted step's replies were read
    assert out["next", "count"].flatten().tolist() == [2, 2]
    env.close()
    _assert_all_stopped(env)


def test_parallel_env_fault_close_joins_workers(no_leftover_workers):
    env = ParallelEnv(3, make_cartpole)
    env.rollout(5)
    pids = env.worker_pids
    children = {p.pid for p in psutil.Process().children()}
    assert set(pids) <= children
    env.close()
    env.close()  # twice is fine
    _assert_all_stopped(env)
    assert not set(pids) & {p.pid for p in psutil.Process().children()}


def test_parallel_env_fault_dropped_env_stops_workers(no_leftover_workers):
    env = ParallelEnv(2, CountingEnv)
    procs = list(env._procs)
    del env
    for proc in procs:
        proc.join(timeout=5)
        assert not proc.is_alive()


_ORPHAN_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    from torchrl_lite.envs import GymEnv, ParallelEnv
    env = ParallelEnv(2, lambda: GymEnv("CartPole-v1"))
    env.rollout(3)
    print(" ".join(map(str, env.worker_pids)), flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    """
)


@pytest.mark.parametrize("how", ["exit", "kill"])
def test_parallel_env_fault_no_orphans_when_parent_exits(how):
    out = subprocess.run(
        [sys.executable, "-c", _ORPHAN_SCRIPT, how], capture_output=True, text=True, timeout=60
    )
    pids = [int(p) for p in out.stdout.split()]
    assert len(pids) == 2, out.stderr
    deadline = time.monotonic() + 5
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [
            p
            for p in pids
            if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
        ]
        time.sleep(0.05)
    assert not alive, f"workers outlived their parent ({how}): {alive}"


def test_parallel_env_spawn_start_method(no_leftover_workers):
    with ParallelEnv(
        2, lambda: GymEnv("CartPole-v1"), mp_start_method="spawn", num_processes=1
    ) as env:
        with SerialEnv(2, make_cartpole) as serial:
            a, b = _rollout(serial, 1, 20), _rollout(env, 1, 20)
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


def test_batched_env_state_dict_checks_kind_and_copy_count(no_leftover_workers):
    with SerialEnv(2, make_cartpole) as env, SerialEnv(3, make_cartpole) as three:
        state = env.state_dict()
        assert [s["kind"] for s in state["envs"]] == ["gym", "gym"]
        with pytest.raises(ValueError, match="2 SerialEnv copies, this env has 3"):
            three.load_state_dict(state)
        with pytest.raises(ValueError, match="expects an env state of kind 'gym'"):
            make_cartpole().load_state_dict(state)
        with pytest.raises(ValueError, match="unknown env state kind 'other'"):
            env.load_state_dict({"kind": "other"})
    with ParallelEnv(2, make_cartpole) as parallel:
        with pytest.warns(UserWarning, match="not bit-exact"):
            state = parallel.state_dict()
        parallel.load_state_dict(state)  # nothing to restore


def test_closed_parallel_env_pickles_and_its_copy_restarts_running_one_refused():
    """A closed ParallelEnv (lambdas for factories, as TorchRL's scripts pass) travels to
    another process's pickle and starts its own workers at its first reset, stepping as a
    plain gymnasium env with the same seed; a running one is refused by name."""
    import pickle

    import gymnasium

    env = ParallelEnv(2, lambda: GymEnv("Pendulum-v1"))
    with pytest.raises(TypeError, match="ParallelEnv is running: its worker processes cannot"):
        pickle.dumps(env)
    env.close()
    copy = pickle.loads(pickle.dumps(env))
    copy.set_seed(3)
    obs = copy.reset()["observation"]
    reference = gymnasium.make("Pendulum-v1")
    first, _ = reference.reset(seed=3)
    assert torch.allclose(obs[0], torch.as_tensor(first, dtype=obs.dtype))
    assert len(copy.worker_pids) == 2 and not copy.is_closed
    copy.close()
