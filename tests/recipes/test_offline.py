"""Offline recipes (CQL, IQL, TD3+BC): dataset files, the trainer adapter, short learning runs."""

import dataclasses

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.datasets import D4RLExperienceReplay
from torchrl_lite.envs import ExplorationType, set_exploration_type
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import make_env
from torchrl_lite.recipes.offline import EvaluationReturns, OfflineBatches, collect_dataset

h5py = pytest.importorskip(
    "h5py", reason="h5py is not installed (pip install 'torchrl-lite[utils]')"
)

OFFLINE = ("cql", "iql", "td3_bc")


def swing_up(td):
    """A hand-written Pendulum-v1 controller (about -160 per episode): pump energy far
    from the top, PD control near it (theta = 0 is up)."""
    cos, sin, speed = td["observation"].unbind(-1)
    theta = torch.atan2(sin, cos)
    energy = 0.5 * speed**2 + 15.0 * cos  # 15 at rest at the top
    pump = 2.0 * torch.sign(speed) * torch.sign(15.0 - energy)
    hold = -(10.0 * theta + 2.0 * speed)
    action = torch.where(cos > 0.85, hold, pump).clamp(-2.0, 2.0)
    return td.set("action", action.unsqueeze(-1))


@pytest.fixture(scope="module")
def pendulum_data(tmp_path_factory):
    """4000 transitions (20 episodes) of the controller with heavy noise."""
    path = tmp_path_factory.mktemp("offline") / "pendulum-swingup.hdf5"
    info = collect_dataset(make_env("Pendulum-v1"), swing_up, 4000, path, seed=0, noise=0.5)
    assert info["episodes"] == 20 and info["mean_return"] > -400, info
    return path


# -- collect_dataset ---------------------------------------------------------------------
def test_collect_dataset_writes_a_d4rl_file_the_dataset_reads(tmp_path):
    path = tmp_path / "random.hdf5"
    info = collect_dataset(make_env("Pendulum-v1"), None, 450, path, seed=0)
    assert info["transitions"] == 450 and info["episodes"] == 2
    with h5py.File(path, "r") as file:
        assert set(file) == {
            "observations", "actions", "rewards", "terminals", "timeouts", "next_observations"
        }  # fmt: skip
        assert file["observations"].shape == (450, 3) and file["actions"].shape == (450, 1)
        assert file["rewards"].shape == (450,) and file["terminals"].dtype == bool
        timeouts = torch.from_numpy(file["timeouts"][:])
    # Pendulum-v1 truncates at 200 steps; the last row is cut by the end of the collection
    assert timeouts.nonzero().flatten().tolist() == [199, 399, 449]

    data = D4RLExperienceReplay("random", root=tmp_path, batch_size=16).data
    assert data.shape == (450,)
    assert data["observation"].shape == (450, 3) and data["action"].shape == (450, 1)
    assert data["next", "reward"].shape == (450, 1)
    assert not data["next", "terminated"].any()
    assert data["next", "truncated"].flatten().nonzero().flatten().tolist() == [199, 399, 449]
    assert data["collector", "traj_ids"].unique().tolist() == [0, 1, 2]
    # within an episode, the next observation is the following row's observation
    inside = ~data["next", "done"][:-1].flatten()
    assert torch.equal(data["next", "observation"][:-1][inside], data["observation"][1:][inside])
    assert data["action"].abs().max() <= 2.0


def test_collect_dataset_batched_env_noise_and_seed(tmp_path):
    env = make_env("Pendulum-v1", num_envs=2)
    state = torch.get_rng_state()
    a = collect_dataset(env, swing_up, 300, tmp_path / "a.hdf5", seed=3, noise=1.0)
    assert torch.equal(torch.get_rng_state(), state)  # torch's global RNG is untouched
    collect_dataset(env, swing_up, 300, tmp_path / "b.hdf5", seed=3, noise=1.0)
    assert a["episodes"] == 0 and a["transitions"] == 300  # 150 steps of each copy
    with h5py.File(tmp_path / "a.hdf5") as fa, h5py.File(tmp_path / "b.hdf5") as fb:
        actions = torch.from_numpy(fa["actions"][:])
        assert torch.equal(actions, torch.from_numpy(fb["actions"][:]))  # same seed
        assert torch.from_numpy(fa["timeouts"][:]).nonzero().flatten().tolist() == [149, 299]
        obs, nxt = (torch.from_numpy(fa[k][:]) for k in ("observations", "next_observations"))
    assert torch.equal(nxt[:149], obs[1:150]) and torch.equal(nxt[150:299], obs[151:])
    assert actions.abs().max() <= 2.0 and 0 < (actions.abs() == 2.0).float().mean() < 1


def test_collect_dataset_samples_a_stochastic_actor_without_noise(tmp_path):
    """D4RL's protocol: a stochastic policy's actions are sampled, not its mode."""
    from tensordict.nn import NormalParamExtractor, TensorDictModule

    from torchrl_lite.modules import ProbabilisticActor, TanhNormal

    env = make_env("Pendulum-v1")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
    )
    collect_dataset(env, actor, 200, tmp_path / "sampled.hdf5", seed=0, noise=0.0)
    with h5py.File(tmp_path / "sampled.hdf5") as file:
        obs = torch.from_numpy(file["observations"][:])
        actions = torch.from_numpy(file["actions"][:])
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        mode = actor(TensorDict(observation=obs, batch_size=[200]))["action"]
    gap = (actions - mode).abs()
    assert gap.mean() > 0.1 and gap.max() < 4.0  # samples around the mode, not the mode
    assert actions.abs().max() <= 2.0


def test_collect_dataset_bad_input(tmp_path):
    env = make_env("Pendulum-v1")
    with pytest.raises(ValueError, match=r"\.hdf5"):
        collect_dataset(env, None, 10, tmp_path / "data.h5")
    with pytest.raises(ValueError, match="frames"):
        collect_dataset(env, None, 0, tmp_path / "data.hdf5")


# -- the pieces the recipes share --------------------------------------------------------
def test_offline_batches_count_gradient_steps(pendulum_data):
    recipe = get_recipe("td3_bc")
    cfg = config_for(recipe, dataset=str(pendulum_data), frames=30, hidden=16, batch_size=32)
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    batches = trainer.collector
    assert isinstance(batches, OfflineBatches)
    sizes = []
    trainer.register_op("post_loss", lambda sub: sizes.append(sub.batch_size))
    trainer.train()
    assert trainer.collected_frames == trainer.optim_count == batches.steps == 30
    assert sizes == [torch.Size([32])] * 30
    assert batches.state_dict() == {"steps": 30}


def test_evaluation_returns_runs_at_intervals_and_stops_at_target():
    class Trainer:  # what the hook reads of a trainer
        collected_frames, total_frames = 0, 12

    env = make_env("Pendulum-v1", num_envs=2, seed=0)
    hook = EvaluationReturns(env, swing_up, interval=5, steps=200)
    hook._trainer = trainer = Trainer()
    for step in range(1, 13):
        trainer.collected_frames = step
        out = hook()
        assert (out is None) == (step not in (1, 5, 10, 12))
    assert [s for s, _ in hook.history] == [1, 5, 10, 12]  # first, every 5, last
    assert all(r > -400 for _, r in hook.history) and hook.solved_at is None

    hook = EvaluationReturns(env, swing_up, interval=5, steps=200, target=-400.0)
    hook._trainer = trainer = Trainer()
    trainer.collected_frames = 1
    assert hook()["eval_return"] == hook.running_mean() > -400
    assert hook.solved_at == 1 and trainer.total_frames == 1  # the trainer stops there
    with pytest.raises(ValueError, match="interval"):
        EvaluationReturns(env, swing_up, interval=0, steps=200)


# -- recipes -----------------------------------------------------------------------------
def test_offline_recipes_missing_or_mismatched_dataset(tmp_path, pendulum_data):
    missing = tmp_path / "nope.hdf5"
    for algo in OFFLINE:
        recipe = get_recipe(algo)
        assert recipe.OFFLINE is True
        with pytest.raises(FileNotFoundError, match="collect_dataset") as err:
            recipe.make_trainer(config_for(recipe, dataset=str(missing)), progress_bar=False)
        assert str(missing) in str(err.value)
        with pytest.raises(ValueError, match="dataset="):
            recipe.make_trainer(config_for(recipe), progress_bar=False)
    recipe = get_recipe("iql")
    cfg = config_for(recipe, "MountainCarContinuous-v0", dataset=str(pendulum_data))
    with pytest.raises(ValueError, match="another env"):
        recipe.make_trainer(cfg, progress_bar=False)


def test_offline_recipe_configs_are_frozen_and_documented():
    for algo in OFFLINE:
        recipe = get_recipe(algo)
        cfg = recipe.Config()
        with pytest.raises(dataclasses.FrozenInstanceError):
            cfg.lr = 1.0
        assert {"env", "dataset", "frames", "seed", "target"} <= set(vars(cfg))


@pytest.mark.parametrize("algo", OFFLINE)
def test_offline_recipe_resumes_exactly(algo, pendulum_data, tmp_path):
    recipe = get_recipe(algo)
    cfg = config_for(
        recipe, dataset=str(pendulum_data), frames=40, eval_interval=10, hidden=16,
        batch_size=32, eval_episodes=2,
    )  # fmt: skip

    def build(checkpoint=None):
        trainer, policy = recipe.make_trainer(cfg, checkpoint=checkpoint, progress_bar=False)
        evaluation = recipe.make_evaluation(cfg, policy)
        evaluation.register(trainer)
        return trainer, evaluation

    straight, straight_eval = build()
    straight.train()
    first, _ = build(tmp_path / "ckpt")
    first.total_frames = 20  # stop half-way; train() checkpoints at the end
    first.train()
    resumed, resumed_eval = build(tmp_path / "ckpt")
    resumed.load()
    assert resumed.collected_frames == resumed.collector.steps == 20
    resumed.train()
    assert resumed.collected_frames == 40
    assert resumed_eval.history == straight_eval.history
    for key, value in straight.loss_module.state_dict().items():
        assert torch.equal(value, resumed.loss_module.state_dict()[key]), key


@pytest.mark.parametrize("algo", OFFLINE)
def test_offline_recipe_learns_from_a_dataset_short(algo, pendulum_data):
    recipe = get_recipe(algo)
    cfg = config_for(
        recipe, dataset=str(pendulum_data), frames=1_000, eval_interval=500, hidden=32,
        batch_size=128, eval_episodes=4,
    )  # fmt: skip
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    evaluation = recipe.make_evaluation(cfg, policy)
    evaluation.register(trainer)
    batch = trainer.collector.dataset.data[::8].clone()  # 500 fixed transitions

    def fit():
        """(Q-loss, squared distance of the policy's action to the data's) on ``batch``."""
        with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
            action = policy(batch.select("observation").clone())["action"]
            torch.manual_seed(0)
            losses = trainer.loss_module(batch.clone())
        return float(losses["loss_qvalue"]), float((action - batch["action"]).pow(2).mean())

    q_before, bc_before = fit()
    trainer.train()
    q_after, bc_after = fit()
    steps, returns = zip(*evaluation.history)
    assert steps == (1, 500, 1_000)
    assert q_after < 0.5 * q_before, (q_before, q_after)  # the critics fit the data
    assert bc_after < 0.95 * bc_before, (bc_before, bc_after)  # the policy nears the data's
    assert returns[-1] > returns[0] + 150, returns  # and it does better than untrained


def test_cli_offline_run_saves_the_dataset_path_absolute(pendulum_data, tmp_path, monkeypatch):
    import json
    import shutil

    from torchrl_lite.cli import main

    shutil.copy(pendulum_data, tmp_path / "data.hdf5")
    monkeypatch.chdir(tmp_path)  # the dataset is given relative to here
    argv = ["train", "iql", "--env", "Pendulum-v1", "--frames", "20", "--out", "run", "--quiet",
            "dataset=data.hdf5", "eval_interval=10", "eval_episodes=1", "hidden=16"]  # fmt: skip
    assert main(argv) == 0
    saved = json.loads((tmp_path / "run" / "config.json").read_text())["config"]["dataset"]
    assert saved == str(tmp_path / "data.hdf5")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # resuming from another folder still finds the dataset
    assert main(["train", "--resume", str(tmp_path / "run"), "--quiet", "frames=30"]) == 0
