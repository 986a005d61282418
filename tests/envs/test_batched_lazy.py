"""SerialEnv and ParallelEnv over copies whose specs differ: lazily stacked data.

The reference is each copy run alone with the same seed (copy ``i`` of a batched env
seeded with ``s`` gets ``s + i * env_batch.numel()``): its rollout must equal row ``i`` of
the batched env's ``LazyStackedTensorDict``.
"""

import functools
import multiprocessing

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl_lite.data import Bounded, Composite, Stacked, StackedComposite, Unbounded
from torchrl_lite.envs import EnvBase, GymEnv, ParallelEnv, SerialEnv, check_env_specs

BATCHED = [SerialEnv, ParallelEnv]


class TaskEnv(EnvBase):
    """One task: ``obs_dim`` random observations (from a generator seeded by ``set_seed``),
    ``act_dim`` actions in ``[-bound, bound]``, done after ``limit`` steps; the reward is
    ``sum(action) + observation[0]``; ``extra`` adds a ``"task_id"`` entry."""

    def __init__(self, obs_dim=3, act_dim=1, limit=3, extra=False, bound=1.0):
        super().__init__()
        obs = {"observation": Unbounded((obs_dim,)), "steps": Unbounded((1,), dtype=torch.int64)}
        if extra:
            obs["task_id"] = Unbounded((1,), dtype=torch.int64)
        self.observation_spec = Composite(obs)
        self.action_spec = Bounded(-bound, bound, (act_dim,))
        self.obs_dim, self.limit, self.extra, self.t = obs_dim, limit, extra, 0
        self.rng = torch.Generator().manual_seed(0)

    def _obs(self):
        out = {
            "observation": torch.randn(self.obs_dim, generator=self.rng),
            "steps": torch.tensor([self.t]),
        }
        if self.extra:
            out["task_id"] = torch.tensor([7])
        return out

    def _reset(self, tensordict):
        self.t = 0
        return TensorDict(self._obs(), [])

    def _step(self, tensordict):
        self.t += 1
        action = tensordict["action"]
        out = self._obs()
        done = torch.tensor([self.t >= self.limit])
        out.update(
            reward=(action.sum() + out["observation"][0]).reshape(1),
            done=done,
            terminated=done.clone(),
            truncated=torch.zeros(1, dtype=torch.bool),
        )
        return TensorDict(out, [])

    def _set_seed(self, seed):
        self.rng.manual_seed(seed)


MAKE_A = functools.partial(TaskEnv, obs_dim=3, act_dim=1, limit=3)
MAKE_B = functools.partial(TaskEnv, obs_dim=4, act_dim=2, limit=4, extra=True, bound=2.0)


def policy_for(act_dims):
    """A deterministic policy: per copy, ``tanh`` of its first ``act_dim`` observations."""

    def policy(td):
        rows = td.tensordicts if isinstance(td, LazyStackedTensorDict) else [td]
        for row, dim in zip(rows, act_dims):
            row.set("action", torch.tanh(row["observation"][..., :dim]))
        return td

    return policy


def assert_same(got, expected):
    assert set(got.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        torch.testing.assert_close(got[key], expected[key], msg=f"key {key!r}")


@pytest.fixture
def no_leftover_workers():
    before = {p.pid for p in multiprocessing.active_children()}
    yield
    left = [p for p in multiprocessing.active_children() if p.pid not in before]
    assert not left, f"worker processes left running: {left}"


# -- the data: each copy's row equals the copy alone -------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_lazy_batched_rollout_equals_each_copy_alone(cls, break_when_any_done, no_leftover_workers):
    with cls(2, [MAKE_A, MAKE_B]) as env:
        env.set_seed(7)
        out = env.rollout(9, policy_for([1, 2]), break_when_any_done=break_when_any_done)
    assert isinstance(out, LazyStackedTensorDict) and out.stack_dim == 0
    steps = 3 if break_when_any_done else 9  # copy 0 is done at step 3
    assert out.batch_size == torch.Size([2, steps])
    for i, (make, dim) in enumerate([(MAKE_A, 1), (MAKE_B, 2)]):
        alone = make()
        alone.set_seed(7 + i)
        expected = alone.rollout(steps, policy_for([dim]), break_when_any_done=False)
        assert_same(out[i], expected)
    assert "task_id" in out[1].keys() and "task_id" not in out[0].keys()
    assert out[1]["next", "observation"].shape == torch.Size([steps, 4])


@pytest.mark.parametrize("cls", BATCHED)
def test_lazy_batched_gym_copies_equal_gym_envs_alone(cls, no_leftover_workers):
    makers = [lambda: GymEnv("Pendulum-v1"), lambda: GymEnv("MountainCarContinuous-v0")]

    def policy(td):
        return td.set("action", torch.full((*td.batch_size, 1), 0.5))

    with cls(2, makers) as env:
        env.set_seed(3)
        out = env.rollout(6, policy, break_when_any_done=False)
        # the bounds differ, the shape and class agree: one Bounded with stacked bounds
        assert env.action_spec == Bounded(
            torch.tensor([[-2.0], [-1.0]]), torch.tensor([[2.0], [1.0]]), (2, 1)
        )
    for i, make in enumerate(makers):
        alone = make()
        alone.set_seed(3 + i)
        assert_same(out[i], alone.rollout(6, policy, break_when_any_done=False))


@pytest.mark.parametrize("cls", BATCHED)
def test_lazy_batched_partial_reset(cls, no_leftover_workers):
    with cls(2, [MAKE_A, MAKE_B]) as env:
        env.set_seed(1)
        policy = policy_for([1, 2])
        td = env.reset()
        td = env.step(policy(td))
        root = td["next"].exclude("reward")
        kept = root[1]["observation"].clone()
        root.set("_reset", torch.tensor([[True], [False]]))
        out = env.reset(root)
        assert out is root and "_reset" not in root[0].keys()  # updated in place
        assert root[0]["steps"].item() == 0 and root[1]["steps"].item() == 1
        torch.testing.assert_close(root[1]["observation"], kept)
    # copy 0 alone: reset, step, reset again
    ref = MAKE_A()
    ref.set_seed(1)
    first = ref.reset()
    ref.step(policy_for([1])(first))
    torch.testing.assert_close(root[0]["observation"], ref.reset()["observation"])


def test_lazy_batched_partial_reset_inside_a_batched_copy():
    inner = [lambda: SerialEnv(2, MAKE_A), lambda: SerialEnv(2, MAKE_B)]
    with SerialEnv(2, inner) as env:
        assert env.batch_size == torch.Size([2, 2])
        td = env.rand_action(env.reset())
        root = env.step(td)["next"].exclude("reward")
        root.set("_reset", torch.tensor([[[True], [False]], [[False], [False]]]))
        env.reset(root)
        assert root[0]["steps"].flatten().tolist() == [0, 1]
        assert root[1]["steps"].flatten().tolist() == [1, 1]
        check_env_specs(env)


# -- specs, random actions, checks ---------------------------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
def test_lazy_batched_specs_are_stacked_copy_specs(cls, no_leftover_workers):
    a, b = MAKE_A(), MAKE_B()
    with cls(2, [MAKE_A, MAKE_B]) as env:
        assert isinstance(env.observation_spec, StackedComposite)
        assert env.observation_spec == torch.stack([a.observation_spec, b.observation_spec], 0)
        assert env.observation_spec[0] == a.observation_spec
        assert env.observation_spec[1] == b.observation_spec
        assert env.observation_spec.keys() == ["observation", "steps"]  # what both have
        assert env.observation_spec["observation"].shape == torch.Size([2, -1])
        assert isinstance(env.action_spec, Stacked) and env.action_spec[1] == b.action_spec
        assert env.done_spec == a.done_spec.expand(2)  # equal specs stack to expanded ones
        td = env.rand_action()
        assert td[0]["action"].shape == (1,) and td[1]["action"].shape == (2,)
        assert env.action_spec.is_in([td[0]["action"], td[1]["action"]])
        fake = env.fake_tensordict()
        assert "task_id" in fake[1].keys() and ("next", "task_id") in fake[1].keys(True)
        check_env_specs(env, seed=0)
        td = env.step(env.rand_action(env.reset()))
        assert isinstance(td["next"], LazyStackedTensorDict)
        assert td[1]["next", "observation"].shape == (4,)


def test_lazy_batched_action_of_a_wrong_shape_names_the_copy():
    with SerialEnv(2, [MAKE_A, MAKE_B]) as env:
        td = env.reset()
        td[0].set("action", torch.zeros(1))
        td[1].set("action", torch.zeros(3))
        with pytest.raises(
            ValueError, match=r"Action 'action' of copy 1 has shape \[3\], expected \[2\]"
        ):
            env.step(td)
        with pytest.raises(TypeError, match="actions go in a LazyStackedTensorDict"):
            env.rand_action(TensorDict({}, [2]))


def test_lazy_batched_env_restarts_after_close():
    env = SerialEnv(2, [MAKE_A, MAKE_B])
    env.set_seed(5)
    first = env.rollout(4, policy_for([1, 2]), break_when_any_done=False)
    env.close()
    env.reset()  # restarts: new copies from the same factories
    env.set_seed(5)
    second = env.rollout(4, policy_for([1, 2]), break_when_any_done=False)
    for i in range(2):
        assert_same(second[i], first[i])
    env.close()


# -- combinations that cannot work: clear errors -------------------------------------------
@pytest.mark.parametrize("cls", BATCHED)
def test_batched_env_copies_that_cannot_be_stacked(cls, no_leftover_workers):
    with pytest.raises(
        TypeError,
        match=r"full_action_spec cannot be stacked.*dtypes.*at key 'action'.*"
        r"OneHot\(torch.int64, cpu\)', 'Bounded\(torch.float32, cpu\)'",
    ):
        cls(2, [lambda: GymEnv("CartPole-v1"), lambda: GymEnv("Pendulum-v1")])
    with pytest.raises(ValueError, match=r"env copy 1 has batch size \[2\], copy 0 has \[\]"):
        cls(2, [MAKE_A, lambda: SerialEnv(2, MAKE_A)])


def test_lazy_batched_discrete_tasks_with_different_action_counts():
    # CartPole: Unbounded observation [4], OneHot(2); MountainCar: Bounded [2], OneHot(3)
    makers = [lambda: GymEnv("CartPole-v1"), lambda: GymEnv("MountainCar-v0")]
    with SerialEnv(2, makers) as env:
        assert env.action_spec.shape == torch.Size([2, -1])
        assert [s.n for s in env.action_spec.unbind(0)] == [2, 3]
        check_env_specs(env, seed=0)
        out = env.rollout(5, break_when_any_done=False)
    assert out[0]["action"].shape == (5, 2) and out[1]["action"].shape == (5, 3)
    assert out[1]["next", "observation"].shape == (5, 2)


@pytest.mark.parametrize("cls", BATCHED)
def test_transformed_lazy_batched_env_equals_each_transformed_copy(cls, no_leftover_workers):
    from torchrl_lite.envs import Compose, RewardSum, StepCounter, TransformedEnv

    def transforms():
        return Compose(StepCounter(), RewardSum())

    env = TransformedEnv(cls(2, [MAKE_A, MAKE_B]), transforms())
    env.set_seed(2)
    check_env_specs(env)
    env.set_seed(2)
    out = env.rollout(8, policy_for([1, 2]), break_when_any_done=False)
    env.close()
    for i, (make, dim) in enumerate([(MAKE_A, 1), (MAKE_B, 2)]):
        alone = TransformedEnv(make(), transforms())
        alone.set_seed(2 + i)
        assert_same(out[i], alone.rollout(8, policy_for([dim]), break_when_any_done=False))


def test_lazy_parallel_env_with_groups_of_copies_per_worker(no_leftover_workers):
    makers = [MAKE_A, MAKE_B, MAKE_A, MAKE_B, MAKE_B]  # worker 1's copies 3, 4 are equal
    policy = policy_for([1, 2, 1, 2, 2])
    with SerialEnv(5, makers) as ref:
        ref.set_seed(3)
        expected = ref.rollout(7, policy, break_when_any_done=False)
    with ParallelEnv(5, makers, num_processes=2) as env:
        env.set_seed(3)
        out = env.rollout(7, policy, break_when_any_done=False)
    for i in range(5):
        assert_same(out[i], expected[i])


@pytest.mark.parametrize("cls", [SerialEnv, ParallelEnv])
def test_lazy_batched_env_keeps_its_class_and_equal_copies_have_no_lazy_part(
    cls, no_leftover_workers
):
    # the lazy part is chosen once at construction; the env's class never changes
    tasks = cls(2, [MAKE_A, MAKE_B])
    same = cls(2, [MAKE_A, MAKE_A])
    try:
        assert type(tasks) is cls and type(same) is cls
        assert type(tasks._lazy).__name__ == f"Lazy{cls.__name__[:-3]}"
        assert same._lazy is None
        assert isinstance(tasks.rollout(2), LazyStackedTensorDict)
        assert not isinstance(same.rollout(2), LazyStackedTensorDict)
    finally:
        tasks.close(), same.close()
