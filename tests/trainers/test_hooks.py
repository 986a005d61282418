"""Ready hooks: each one's behaviour on a tiny setup."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from tests.trainers.setups import FPB, tanh_actor
from torchrl_lite.data.replay_buffers import (
    LazyTensorStorage,
    TensorDictPrioritizedReplayBuffer,
    TensorDictReplayBuffer,
)
from torchrl_lite.envs import GymEnv, PendulumEnv, StepCounter, TransformedEnv
from torchrl_lite.envs.transforms import Transform
from torchrl_lite.envs.utils import ExplorationType, exploration_type
from torchrl_lite.trainers import (
    BatchSubSampler,
    ClearCudaCache,
    ComputeAdvantage,
    CountFramesLog,
    LogReward,
    LogScalar,
    OptimizerHook,
    Recorder,
    ReplayBufferTrainer,
    RewardNormalizer,
    ShuffledMiniBatches,
    UpdateWeights,
)


def steps(*batch, obs=3) -> TensorDict:
    """A ``[*batch]`` TensorDict of steps with an ``"idx"`` numbering them."""
    n = math.prod(batch)
    return TensorDict(
        idx=torch.arange(n).reshape(*batch),
        observation=torch.randn(*batch, obs),
        next=TensorDict(
            reward=torch.arange(n, dtype=torch.float32).reshape(*batch, 1),
            done=torch.zeros(*batch, 1, dtype=torch.bool),
            terminated=torch.zeros(*batch, 1, dtype=torch.bool),
            observation=torch.randn(*batch, obs),
            batch_size=batch,
        ),
        batch_size=batch,
    )


# -- OptimizerHook ---------------------------------------------------------------------
def test_optimizer_hook_loss_components():
    a, b = nn.Parameter(torch.ones(1)), nn.Parameter(torch.ones(1))
    hook = OptimizerHook(torch.optim.SGD([a, b], lr=1.0), loss_components=["loss_a"])
    hook(TensorDict(loss_a=a.sum(), loss_b=b.sum()))
    assert a.item() == 0.0 and b.item() == 1.0  # only loss_a was backpropagated
    assert a.grad is None  # zeroed (set to None) after the step


def test_optimizer_hook_errors():
    with pytest.raises(TypeError, match="Optimizer"):
        OptimizerHook(object())
    hook = OptimizerHook(torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=1.0))
    with pytest.raises(KeyError, match="no 'loss\\*' entries"):
        hook(TensorDict(entropy=torch.ones(())))


@pytest.mark.parametrize("per_group", [False, True])
def test_optimizer_hook_clips_each_group_on_its_own_or_all_together(per_group):
    a, b = nn.Parameter(torch.zeros(1)), nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([{"params": [a], "name": "big"}, {"params": [b]}], lr=1.0)
    hook = OptimizerHook(optimizer, clip_per_group=per_group)
    out = hook(TensorDict(loss=10.0 * a.sum() + 0.5 * b.sum()), True, 1.0)  # grads 10, 0.5
    if per_group:  # a's gradient clipped to norm 1, b's (norm 0.5) left alone
        assert a.item() == pytest.approx(-1.0) and b.item() == pytest.approx(-0.5)
        assert out["grad_norm_0_big"].item() == pytest.approx(10.0)
        assert out["grad_norm_0_1"].item() == pytest.approx(0.5)
    else:  # one norm, sqrt(10^2 + 0.5^2), scales both
        total = (10.0**2 + 0.5**2) ** 0.5
        assert a.item() == pytest.approx(-10.0 / total) and b.item() == pytest.approx(-0.5 / total)
        assert out["grad_norm_0"].item() == pytest.approx(total)


def _adam_hook(lr: float, w: nn.Parameter) -> OptimizerHook:
    return OptimizerHook(torch.optim.Adam([w], lr=lr, betas=(0.9, 0.999)))


def test_optimizer_hook_resume_applies_changed_settings_keeps_state():
    w = nn.Parameter(torch.ones(3))
    hook = _adam_hook(0.1, w)
    for _ in range(3):
        hook(TensorDict(loss=(w**2).sum()))
    saved = hook.state_dict()
    # torch's own load keeps the saved lr: a resumed `lr=...` would silently do nothing
    plain = torch.optim.Adam([w], lr=0.01)
    plain.load_state_dict(saved["optimizer"])
    assert plain.param_groups[0]["lr"] == 0.1
    new = OptimizerHook(torch.optim.Adam([w], lr=0.01, betas=(0.5, 0.999)))
    new.load_state_dict(saved)
    group = new.optimizer.param_groups[0]
    assert group["lr"] == pytest.approx(0.01) and group["betas"] == (0.5, 0.999)
    moments = new.optimizer.state[w]  # Adam's moments and step count are the saved ones
    assert moments["step"].item() == 3
    torch.testing.assert_close(moments["exp_avg"], hook.optimizer.state[w]["exp_avg"])
    same = _adam_hook(0.1, w)  # nothing changed: everything as saved
    saved["optimizer"]["param_groups"][0]["lr"] = 0.07  # e.g. lowered by a schedule
    same.load_state_dict(saved)
    assert same.optimizer.param_groups[0]["lr"] == pytest.approx(0.07)


def test_optimizer_hook_resume_scales_a_scheduled_lr_by_the_new_base():
    def build(lr):
        w = nn.Parameter(torch.ones(2))
        optim = torch.optim.SGD([w], lr=lr)
        sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: 1.0 / (1 + step))
        return w, OptimizerHook(optim), sched

    w, hook, sched = build(1.0)
    for _ in range(3):  # steps 0..2 used 1, 1/2, 1/3; the next one uses 1/4
        hook(TensorDict(loss=w.sum()))
        sched.step()
    _, new, new_sched = build(0.2)
    new_sched.load_state_dict(sched.state_dict())
    new_sched.base_lrs = [0.2]  # what dt's _ScheduleState does
    new.load_state_dict(hook.state_dict())
    assert new.optimizer.param_groups[0]["lr"] == pytest.approx(0.2 / 4)
    new_sched.step()
    assert new.optimizer.param_groups[0]["lr"] == pytest.approx(0.2 / 5)


def test_optimizer_hook_resume_from_a_checkpoint_without_settings():
    w = nn.Parameter(torch.ones(2))
    old = {"optimizer": _adam_hook(0.1, w).optimizer.state_dict()}  # before the record
    new = _adam_hook(0.01, w)
    new.load_state_dict(old)
    assert new.optimizer.param_groups[0]["lr"] == pytest.approx(0.01)


# -- ReplayBufferTrainer ---------------------------------------------------------------
def test_replay_buffer_trainer_extend_and_sample():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    hook = ReplayBufferTrainer(buffer, batch_size=5)
    hook.extend(steps(2, 4))
    assert len(buffer) == 8  # flattened into single steps
    sample = hook.sample(None)
    assert sample.batch_size == torch.Size([5]) and "index" in sample.keys()


def test_replay_buffer_trainer_mask_and_padding():
    buffer = TensorDictReplayBuffer(storage=LazyTensorStorage(100))
    batch = steps(2, 3)
    batch["collector", "mask"] = torch.tensor([[True, True, False], [True, False, False]])
    ReplayBufferTrainer(buffer, batch_size=2).extend(batch)
    assert len(buffer) == 3
    padded = TensorDictReplayBuffer(storage=LazyTensorStorage(10))
    ReplayBufferTrainer(padded, 1, flatten_tensordicts=False, max_dims=[-1, 5]).extend(steps(2, 3))
    assert len(padded) == 2 and padded.sample(1).batch_size == torch.Size([1, 5])


def test_replay_buffer_trainer_updates_priorities():
    buffer = TensorDictPrioritizedReplayBuffer(
        alpha=1.0, beta=1.0, storage=LazyTensorStorage(10), batch_size=4
    )
    hook = ReplayBufferTrainer(buffer)
    hook.extend(steps(10))
    sample = hook.sample()
    hot = int(sample["index"][0])
    sample["td_error"] = (sample["index"] == hot).float() * 100.0  # duplicates agree
    hook.update_priority(sample)
    draws = torch.cat([hook.sample()["index"] for _ in range(20)])
    assert (draws == hot).float().mean() > 0.5


def test_replay_buffer_trainer_bad_arguments():
    with pytest.raises(ValueError, match="batch_size"):
        ReplayBufferTrainer(TensorDictReplayBuffer(storage=LazyTensorStorage(10)))
    with pytest.raises(ValueError, match="LazyMemmapStorage"):
        ReplayBufferTrainer(
            TensorDictReplayBuffer(storage=LazyTensorStorage(10)), batch_size=2, memmap=True
        )
    with pytest.raises(TypeError, match="replay buffer"):
        ReplayBufferTrainer([], batch_size=2)


# -- minibatches and advantages -----------------------------------------------------------
class CountingAdvantage(nn.Module):
    """Writes ``advantage = reward + calls`` and counts its calls."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, td):
        self.calls += 1
        td["advantage"] = td["next", "reward"] + self.calls
        return td


def test_shuffled_minibatches_epochs_cover_each_step_once():
    adv = CountingAdvantage()
    hook = ShuffledMiniBatches(4, advantage_module=adv)
    batch = steps(2, 5)  # 10 steps: 2 minibatches per epoch, 2 steps dropped
    hook.new_batch()
    epoch1 = [hook(batch) for _ in range(2)]
    epoch2 = [hook(batch) for _ in range(2)]
    for epoch, calls in ((epoch1, 1), (epoch2, 2)):
        idx = torch.cat([mb["idx"] for mb in epoch])
        assert idx.unique().numel() == 8
        for mb in epoch:
            assert torch.equal(mb["advantage"], mb["next", "reward"] + calls)
    assert adv.calls == 2
    assert "advantage" not in batch.keys()  # the collector's batch is left untouched
    hook.new_batch()
    hook(batch)
    assert adv.calls == 3  # a new batch recomputes the advantage
    once = ShuffledMiniBatches(5, advantage_module=CountingAdvantage(), recompute_each_epoch=False)
    once.new_batch()
    for _ in range(6):
        once(batch)
    assert once.advantage_module.calls == 1


def test_shuffled_minibatches_too_small_batch():
    hook = ShuffledMiniBatches(16)
    hook.new_batch()
    with pytest.raises(ValueError, match="fewer than mini_batch_size=16"):
        hook(steps(8))
    with pytest.raises(ValueError, match="positive int"):
        ShuffledMiniBatches(0)


def test_compute_advantage_writes_on_a_copy():
    batch = steps(2, 3)
    out = ComputeAdvantage(CountingAdvantage())(batch)
    assert "advantage" in out.keys() and "advantage" not in batch.keys()


def test_batch_subsampler_steps_and_windows():
    batch = steps(3, 10)
    flat = BatchSubSampler(6)(batch)
    assert flat.batch_size == torch.Size([6]) and flat["idx"].unique().numel() == 6
    windows = BatchSubSampler(8, sub_traj_len=4)(batch)
    assert windows.batch_size == torch.Size([2, 4])
    assert (windows["idx"].diff(dim=-1) == 1).all()  # consecutive steps of one row
    with pytest.raises(ValueError, match="fewer than sub_traj_len"):
        BatchSubSampler(8, sub_traj_len=20)(batch)


# -- logging ---------------------------------------------------------------------------
def test_log_scalar_reductions_and_mask():
    batch = steps(2, 3)  # rewards 0..5
    assert LogScalar()(batch)["next_reward"].item() == 2.5
    assert LogScalar(reduction="max", logname="m")(batch)["m"].item() == 5.0
    batch["collector", "mask"] = torch.tensor([[True, True, False], [False, False, False]])
    assert LogScalar(reduction="mean")(batch)["next_reward"].item() == 0.5
    assert LogScalar(reduction="max")(batch)["next_reward"].item() == 1.0
    assert LogScalar(reduction="sum", log_pbar=True)(batch)["log_pbar"] is True


def test_log_scalar_missing_key_names_closest():
    with pytest.raises(KeyError, match="Did you mean \\('next', 'reward'\\)"):
        LogScalar(key=("next", "rewards"))(steps(3))
    with pytest.raises(ValueError, match="reduction"):
        LogScalar(reduction="median")


def test_log_reward_episode_return():
    batch = steps(4)
    batch["next", "episode_reward"] = torch.tensor([[1.0], [3.0], [1.0], [2.0]])
    out = LogReward()(batch)
    assert torch.isnan(out["episode_reward"])  # no episode ended
    batch["next", "done"] = torch.tensor([[False], [True], [False], [True]])
    out = LogReward(log_pbar=True)(batch)
    assert out["episode_reward"].item() == 2.5 and out["r_training"].item() == 1.5
    assert out["log_pbar"] is True


def test_count_frames_log_and_state():
    hook = CountFramesLog(frame_skip=2)
    hook(steps(2, 4))
    out = hook(steps(3))
    assert out["n_frames"] == 22
    other = CountFramesLog(frame_skip=2)
    other.load_state_dict(hook.state_dict())
    assert other.frame_count == 22


# -- rewards, weights, cache -----------------------------------------------------------
def test_reward_normalizer_standardises_without_touching_data():
    norm = RewardNormalizer(decay=1.0, scale=2.0)
    batch = steps(10)
    norm.update_reward_stats(batch)
    out = norm.normalize_reward(batch)
    reward = batch["next", "reward"]
    expected = (reward - reward.mean()) / reward.std() * 2.0
    torch.testing.assert_close(out["next", "reward"], expected)
    assert torch.equal(batch["next", "reward"], torch.arange(10.0).unsqueeze(-1))
    restored = RewardNormalizer(decay=1.0, scale=2.0)
    restored.load_state_dict(norm.state_dict())
    torch.testing.assert_close(restored.normalize_reward(batch)["next", "reward"], expected)
    with pytest.raises(RuntimeError, match="before any update_reward_stats"):
        RewardNormalizer().normalize_reward(batch)


def test_update_weights_interval_and_state():
    class Collector:
        calls = 0

        def update_policy_weights_(self):
            self.calls += 1

    hook = UpdateWeights(Collector(), update_weights_interval=3)
    for _ in range(7):
        hook()
    assert hook.collector.calls == 2 and hook.state_dict() == {"counter": 7}
    with pytest.raises(TypeError, match="update_policy_weights_"):
        UpdateWeights(object(), 1)


def test_clear_cuda_cache_counts():
    hook = ClearCudaCache(interval=2)
    for _ in range(3):
        hook()
    assert hook.state_dict() == {"count": 3}


# -- Recorder --------------------------------------------------------------------------
class DumpCounter(Transform):
    """A pass-through transform with a ``dump`` method, like a VideoRecorder."""

    def __init__(self):
        super().__init__(in_keys=[])
        self.dumps = []

    def dump(self, suffix=None):
        self.dumps.append(suffix)


def test_recorder_deterministic_episodes_and_video_dump():
    env = TransformedEnv(GymEnv("Pendulum-v1"), DumpCounter())
    actor = tanh_actor(3, 1, env.action_spec)
    types = []

    def policy(td):
        types.append(exploration_type())
        return actor(td)

    rec = Recorder(
        record_interval=2,
        record_frames=250,
        environment=env,
        policy_exploration=policy,
        suffix="eval",
        log_pbar=True,
    )
    env.set_seed(0)
    first = rec()
    assert rec() is None  # every second call
    assert set(types) == {ExplorationType.DETERMINISTIC}
    assert env.transform[0].dumps == ["eval"]
    # one 200-step episode ended: its return is logged; the mean reward per frame too
    assert -200 * 16.3 <= first["total_r_evaluation"] <= 0
    assert first["log_pbar"] is True and -16.3 <= first["r_evaluation"] <= 0
    env.set_seed(0)
    again = rec()
    assert again["total_r_evaluation"] == first["total_r_evaluation"]  # no sampling


def test_recorder_restores_train_mode_and_logs_other_keys():
    env = TransformedEnv(PendulumEnv(seed=0), StepCounter(max_steps=5))
    actor = tanh_actor(3, 1, env.action_spec)
    rec = Recorder(
        record_interval=1,
        record_frames=10,
        environment=env,
        policy_exploration=actor,
        log_keys=[("next", "reward"), ("next", "step_count")],
        out_keys={("next", "reward"): "r_eval"},
    )
    out = rec()
    assert actor.training
    assert set(out) == {"r_eval", "total_r_eval", "next_step_count", "log_pbar"}
    assert out["next_step_count"] == 3.0  # two 5-step episodes
    with pytest.raises(TypeError, match="rollout"):
        Recorder(record_interval=1, record_frames=1, policy_exploration=actor)


def test_ready_hooks_register_under_default_names():
    from tests.trainers.setups import ppo_run

    run = ppo_run(1)
    trainer = run.trainer
    LogReward().register(trainer)
    LogScalar(key=("next", "step_count")).register(trainer)
    CountFramesLog().register(trainer)
    UpdateWeights(run.collector, 1).register(trainer)
    ClearCudaCache(1).register(trainer)
    assert set(trainer._modules) == {
        "optimizer",
        "minibatches",
        "log_r_training",
        "log_next_step_count",
        "count_frames_log",
        "update_weights",
        "clear_cuda_cache",
    }
    trainer.train()
    assert trainer.collected_frames == FPB
