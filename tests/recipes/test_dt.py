"""Decision transformer: the model's causality, the return-to-go transforms, the window
buffer, learning a known dataset, return conditioning, ODT's buffer refresh, the CLI."""

import json
import math

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.cli import main
from torchrl_lite.data import Bounded
from torchrl_lite.data.datasets import TrajectoryWindows, returns_to_go
from torchrl_lite.envs import Compose, DTContext, GymEnv, TargetReturn, TransformedEnv
from torchrl_lite.envs.utils import check_env_specs
from torchrl_lite.modules.models.decision_transformer import (
    BoundedDTActor,
    DecisionTransformer,
    DTInferenceWrapper,
)
from torchrl_lite.objectives import DTLoss
from torchrl_lite.recipes import dt, odt
from torchrl_lite.recipes.common import make_env
from torchrl_lite.recipes.offline import collect_dataset

h5py = pytest.importorskip(
    "h5py", reason="h5py is not installed (pip install 'torchrl-lite[utils]')"
)


def _window(b, k, s=3, a=1):
    return dict(
        observation=torch.randn(b, k, s), action=torch.randn(b, k, a),
        return_to_go=torch.randn(b, k, 1), timestep=torch.arange(k).expand(b, k),
        mask=torch.ones(b, k, dtype=torch.bool),
    )  # fmt: skip


def _flat(rewards, ids, obs_dim=3):
    n = len(rewards)
    return TensorDict(
        {
            "observation": torch.arange(n, dtype=torch.float32).unsqueeze(-1).expand(n, obs_dim),
            "action": torch.arange(n, dtype=torch.float32).unsqueeze(-1),
            ("next", "reward"): torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1),
            ("collector", "traj_ids"): torch.tensor(ids),
        },
        batch_size=[n],
    )


# -- the model ---------------------------------------------------------------------------
def test_decision_transformer_is_causal_and_ignores_padding():
    torch.manual_seed(0)
    net = DecisionTransformer(3, 1, 5, hidden=16, n_layer=2, dropout=0.0).eval()
    w = _window(2, 5)
    out = net(**w)
    later = {k: v.clone() for k, v in w.items()}
    later["action"][:, 2] += 5.0  # a_2 and everything of steps 3, 4
    later["observation"][:, 3:] += 5.0
    later["return_to_go"][:, 3:] += 5.0
    changed = net(**later)
    torch.testing.assert_close(changed[:, :3], out[:, :3])  # steps 0-2 predict a_0..a_2
    assert not torch.allclose(changed[:, 3:], out[:, 3:])
    padded = {k: v.clone() for k, v in w.items()}
    padded["mask"][:, :2] = False
    base = net(**padded)
    padded["observation"][:, :2] = 100.0  # what padding holds does not matter
    torch.testing.assert_close(net(**padded)[:, 2:], base[:, 2:])
    with pytest.raises(ValueError, match="context_length=5"):
        net(**_window(2, 6))


# -- env transforms ------------------------------------------------------------------------
def test_target_return_is_decremented_by_the_rewards():
    env = TransformedEnv(GymEnv("Pendulum-v1"), TargetReturn(-100.0, scale=10.0))
    check_env_specs(env)
    env.set_seed(0)
    td = env.rollout(6)
    rewards = td["next", "reward"].flatten()
    expected = (-100.0 - torch.cumsum(rewards, 0)) / 10.0
    torch.testing.assert_close(td["next", "return_to_go"].flatten(), expected)
    assert td["return_to_go"][0].item() == -10.0
    with pytest.raises(ValueError, match="scale must be > 0"):
        TargetReturn(1.0, scale=0.0)


def test_dt_context_matches_a_plain_loop():
    k = 3
    env = TransformedEnv(
        make_env("Pendulum-v1", num_envs=2), Compose(TargetReturn(-50.0), DTContext(k))
    )
    check_env_specs(env)
    env.set_seed(1)
    td = env.rollout(5)
    obs, act, rtg = td["observation"], td["action"], td["return_to_go"]  # [2, T, ...]
    for t in range(5):
        ctx = td["context"][:, t]  # the window the policy saw at step t
        for j in range(k):
            u = t - (k - 1 - j)  # the step in slot j
            real = u >= 0
            assert bool(ctx["mask"][0, j]) == real
            if real:
                torch.testing.assert_close(ctx["observation"][:, j], obs[:, u])
                torch.testing.assert_close(ctx["return_to_go"][:, j], rtg[:, u])
                assert ctx["timestep"][0, j].item() == u
                expected = act[:, u] if u < t else torch.zeros_like(act[:, u])
                torch.testing.assert_close(ctx["action"][:, j], expected)


# -- the dataset side ----------------------------------------------------------------------
def test_returns_to_go_and_windows_match_hand_slices():
    data = _flat([1.0, 2.0, 3.0, 4.0, 5.0], [0, 0, 0, 1, 1])
    torch.testing.assert_close(
        returns_to_go(
            data["next", "reward"], data["collector", "traj_ids"], reward_scale=2.0
        ).flatten(),
        torch.tensor([3.0, 2.5, 1.5, 4.5, 2.5]),
    )
    windows = TrajectoryWindows(data, context_length=2, reward_scale=2.0)
    batch = windows.sample(64, generator=torch.Generator().manual_seed(0))
    starts = [0, 0, 0, 3, 3]
    rtg = [3.0, 2.5, 1.5, 4.5, 2.5]
    for row in batch.unbind(0):
        end = int(row["action"][-1])  # actions are the flat indices
        for j, u in enumerate((end - 1, end)):
            if u >= starts[end]:
                assert row["mask"][j] and row["action"][j].item() == u
                assert row["return_to_go"][j].item() == rtg[u]
                assert row["timestep"][j].item() == u - starts[end]
            else:
                assert not row["mask"][j] and row["observation"][j].abs().sum() == 0
    assert len(windows) == 5 and windows.returns().tolist() == [6.0, 9.0]


def test_windows_bad_input_names_the_missing_field():
    data = _flat([1.0, 2.0, 3.0], [0, 0, 1])
    with pytest.raises(
        KeyError, match=r"no .*next.*reward.* entry \(the return-to-go sums the rewards\)"
    ):
        TrajectoryWindows(data.exclude(("next", "reward")), 2)
    with pytest.raises(KeyError, match=r"no .*collector.*traj_ids.* entry \(episode ends"):
        TrajectoryWindows(data.exclude(("collector", "traj_ids")), 2)
    with pytest.raises(
        ValueError, match=r"context_length=3 is longer than every trajectory.*longest has 2"
    ):
        TrajectoryWindows(data, 3)


def test_dt_recipe_rejects_a_file_without_rewards_or_episode_ends(tmp_path):
    for missing in ("rewards", "terminals"):
        path = tmp_path / f"no-{missing}.hdf5"
        with h5py.File(path, "w") as f:
            f["observations"] = torch.randn(10, 3).numpy()
            f["actions"] = torch.randn(10, 1).numpy()
            if missing != "rewards":
                f["rewards"] = torch.zeros(10).numpy()
            if missing != "terminals":
                f["terminals"] = torch.zeros(10, dtype=torch.bool).numpy()
        with pytest.raises(KeyError, match=missing):
            dt.make_trainer(dt.Config(dataset=str(path)), progress_bar=False)


# -- learning ----------------------------------------------------------------------------
def _fit(windows, actor, steps, lr=3e-3):
    loss = DTLoss(actor)
    optim = torch.optim.Adam(loss.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(0)
    for _ in range(steps):
        value = loss(windows.sample(32, generator=gen))["loss"]
        optim.zero_grad()
        value.backward()
        optim.step()
    return loss


def test_dt_predicts_the_actions_of_a_known_dataset():
    torch.manual_seed(0)
    n = 400
    obs = torch.randn(n, 3)
    data = TensorDict(
        {
            "observation": obs, "action": torch.tanh(obs @ torch.tensor([[1.0], [-0.5], [0.3]])),
            ("next", "reward"): torch.zeros(n, 1),
            ("collector", "traj_ids"): torch.arange(n) // 20,
        },
        batch_size=[n],
    )  # fmt: skip
    windows = TrajectoryWindows(data, context_length=4)
    actor = BoundedDTActor(
        DecisionTransformer(3, 1, 4, hidden=32, n_layer=1, dropout=0.0), Bounded(-1.0, 1.0, (1,))
    )
    batch = windows.sample(256, generator=torch.Generator().manual_seed(1))
    before = DTLoss(actor)(batch)["loss"].item()
    _fit(windows, actor, 300)
    after = DTLoss(actor)(batch)["loss"].item()
    assert after < 0.1 * before and after < 0.01


def test_dt_action_follows_the_return_it_is_conditioned_on():
    """Episodes of 8 steps: action +0.8 earns 1 per step (return 8), -0.8 earns 0; the
    observations say nothing, so only the return-to-go tells which to play."""
    torch.manual_seed(0)
    episodes, length = 40, 8
    sign = torch.tensor([1.0, -1.0]).repeat(episodes // 2).repeat_interleave(length)
    n = episodes * length
    data = TensorDict(
        {
            "observation": torch.randn(n, 3) * 0.1, "action": 0.8 * sign.unsqueeze(-1),
            ("next", "reward"): (sign > 0).float().unsqueeze(-1),
            ("collector", "traj_ids"): torch.arange(n) // length,
        },
        batch_size=[n],
    )  # fmt: skip
    windows = TrajectoryWindows(data, context_length=4, reward_scale=8.0)
    actor = BoundedDTActor(
        DecisionTransformer(3, 1, 4, hidden=32, n_layer=1, dropout=0.0), Bounded(-1.0, 1.0, (1,))
    )
    _fit(windows, actor, 200)
    policy = DTInferenceWrapper(actor)
    first = TensorDict(
        observation=torch.zeros(2, 4, 3), action=torch.zeros(2, 4, 1),
        return_to_go=torch.tensor([1.0, 0.0]).reshape(2, 1, 1).expand(2, 4, 1),
        timestep=torch.zeros(2, 4, dtype=torch.long),
        mask=torch.tensor([False, False, False, True]).expand(2, 4), batch_size=[2, 4],
    )  # fmt: skip
    with torch.no_grad():
        action = policy(TensorDict(context=first, batch_size=[2]))["action"].flatten()
    assert action[0] > 0.5 and action[1] < -0.5, action


# -- ODT: the buffer takes the policy's own trajectories ------------------------------------
@pytest.fixture(scope="module")
def random_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dt") / "pendulum-random.hdf5"
    collect_dataset(make_env("Pendulum-v1"), None, 600, path, seed=0)  # 3 episodes
    return path


def test_odt_refresh_replaces_the_oldest_trajectories(random_file):
    cfg = odt.Config(
        dataset=str(random_file), frames=4, pretrain_steps=2, online_interval=2, online_episodes=2,
        eval_steps=30, buffer_trajectories=4, hidden=8, n_layer=1, context_length=3, batch_size=8,
        buffer_evict="oldest",
    )  # fmt: skip
    trainer, policy = odt.make_trainer(cfg, progress_bar=False)
    windows = trainer.collector.dataset
    assert windows.num_trajectories == 3 and len(windows) == 600
    trainer.train()  # collections after steps 2 and 4: 2 episodes of 30 steps each
    refresh = odt.online_refresh_of(trainer)
    assert refresh.env_frames == 120 and [s for s, _ in refresh.returns] == [2, 4]
    assert windows.num_trajectories == 4  # 3 + 4 added, the 3 oldest (the dataset's) dropped
    assert len(windows) == 4 * 30
    assert windows.returns().mean().item() == pytest.approx(
        sum(r for _, r in refresh.returns) / 2, rel=1e-4
    )
    with pytest.raises(ValueError, match="pretrain_steps=5 exceeds frames=4"):
        odt.make_trainer(odt.Config(dataset=str(random_file), frames=4, pretrain_steps=5))


def test_cli_trains_dt_and_odt(random_file, tmp_path):
    small = ["hidden=8", "n_layer=1", "context_length=4", "batch_size=8", "eval_steps=20",
             "eval_episodes=2", "eval_interval=3"]  # fmt: skip
    for algo, extra in (
        ("dt", []),
        ("odt", ["pretrain_steps=2", "online_interval=2", "online_episodes=1"]),
    ):
        out = tmp_path / algo
        code = main(["train", algo, f"dataset={random_file}", "--frames", "4", "--out", str(out),
                     "--logger", "none", "--quiet", *small, *extra])  # fmt: skip
        assert code == 0
        summary = json.loads((out / "summary.json").read_text())
        assert summary["algo"] == algo and summary["frames"] == 4


def test_lr_schedule_warms_up_then_decays_to_zero_or_stays(random_file):
    seen = {}
    for schedule in ("cosine", "constant"):
        cfg = dt.Config(dataset=str(random_file), frames=10, warmup_steps=2, lr=1e-2,
                        hidden=8, n_layer=1, context_length=4, batch_size=8,
                        lr_schedule=schedule)  # fmt: skip
        trainer, _ = dt.make_trainer(cfg, progress_bar=False)
        optim = trainer._modules["lr_schedule"].schedule.optimizer
        lrs = []
        trainer.register_op(
            "post_optim", lambda lrs=lrs, optim=optim: lrs.append(optim.param_groups[0]["lr"])
        )
        trainer.train()
        seen[schedule] = lrs
    # the value each step used, written out: warm-up 0.5, 1, then cos / constant
    steps = range(10)
    cosine = [1e-2 * (s + 1) / 2 if s < 2 else 1e-2 * 0.5 * (1 + math.cos(math.pi * (s - 2) / 8))
              for s in steps]  # fmt: skip
    constant = [1e-2 * min(1.0, (s + 1) / 2) for s in steps]
    # the hook runs after the scheduler's own post_optim step: the next step's value
    assert seen["cosine"][:-1] == pytest.approx(cosine[1:], abs=1e-12)
    assert seen["constant"][:-1] == pytest.approx(constant[1:], abs=1e-12)
    assert odt.Config().lr_schedule == "constant"  # the online phase keeps learning


def test_resume_with_another_lr_keeps_the_schedule_on_the_new_base(random_file, tmp_path):
    def build(lr):  # 4 steps, all within the 8-step warm-up
        cfg = dt.Config(dataset=str(random_file), frames=4, warmup_steps=8, lr=lr, hidden=8,
                        n_layer=1, context_length=4, batch_size=8)  # fmt: skip
        return dt.make_trainer(cfg, checkpoint=tmp_path / "ck", progress_bar=False)[0]

    build(1e-2).train()
    resumed = build(1e-3)
    resumed.load(tmp_path / "ck")
    schedule = resumed._modules["lr_schedule"].schedule
    # 4 steps into the warm-up (factor 5/8), on the new base rate, now and at the next step
    assert schedule.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 5 / 8, abs=1e-15)
    schedule.step()
    assert schedule.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 * 6 / 8, abs=1e-15)


def test_lr_schedule_rejects_an_unknown_name(random_file):
    cfg = dt.Config(dataset=str(random_file), frames=4, lr_schedule="cosin")
    with pytest.raises(
        ValueError, match=r"lr_schedule='cosin' is not one of \['cosine', 'constant'\]"
    ):
        dt.make_trainer(cfg, progress_bar=False)


def test_default_target_is_the_files_best_episode_return(random_file):
    import h5py as h5

    with h5.File(random_file) as f:  # the file's three 200-step episodes, summed by hand
        rewards = f["rewards"][:]
    best = max(float(rewards[i : i + 200].sum()) for i in range(0, 600, 200))
    cfg = dt.Config(dataset=str(random_file))
    assert cfg.target_return is None
    assert dt.target_of(cfg) == pytest.approx(best, rel=1e-5)
    env = dt.make_eval_env(cfg)
    target = next(t for t in env.transform if isinstance(t, TargetReturn))
    assert target.target_return == pytest.approx(best, rel=1e-5)
    env.close()
    assert dt.target_of(dt.Config(dataset=str(random_file), target_return=-150.0)) == -150.0
