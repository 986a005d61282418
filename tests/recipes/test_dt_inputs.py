"""Decision transformer inputs: observation normalization by the dataset's statistics,
the same in training (the recipe's loss) and in acting (the evaluation env's policy)."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data.datasets import TrajectoryWindows
from torchrl_lite.envs import ExplorationType, set_exploration_type
from torchrl_lite.modules.models.decision_transformer import BoundedDTActor, DecisionTransformer
from torchrl_lite.recipes import dt
from torchrl_lite.recipes.common import make_env
from torchrl_lite.recipes.offline import collect_dataset

h5py = pytest.importorskip(
    "h5py", reason="h5py is not installed (pip install 'torchrl-lite[utils]')"
)


def _window(b, k, obs):
    return dict(
        observation=obs, action=torch.randn(b, k, 1), return_to_go=torch.randn(b, k, 1),
        timestep=torch.arange(k).expand(b, k), mask=torch.ones(b, k, dtype=torch.bool),
    )  # fmt: skip


def test_model_normalizes_observations_with_its_buffers():
    torch.manual_seed(0)
    mean, std = torch.tensor([1.0, -2.0, 3.0]), torch.tensor([0.5, 2.0, 4.0])
    net = DecisionTransformer(3, 1, 4, hidden=16, n_layer=1, dropout=0.0, state_mean=mean,
                              state_std=std).eval()  # fmt: skip
    plain = DecisionTransformer(3, 1, 4, hidden=16, n_layer=1, dropout=0.0).eval()
    plain.load_state_dict(net.state_dict() | {"state_mean": torch.zeros(3),
                                              "state_std": torch.ones(3)})  # fmt: skip
    w = _window(2, 4, torch.randn(2, 4, 3) * 5)
    normalized = dict(w, observation=(w["observation"] - mean) / std)
    torch.testing.assert_close(net(**w), plain(**normalized))
    assert {"state_mean", "state_std"} <= set(net.state_dict())  # checkpoints carry them


def test_model_rejects_bad_statistics():
    with pytest.raises(ValueError, match="state_mean has 2 entries but state_dim is 3"):
        DecisionTransformer(3, 1, 4, state_mean=torch.zeros(2))
    with pytest.raises(ValueError, match=r"state_std must be > 0 everywhere, got \[1.0, 0.0"):
        DecisionTransformer(3, 1, 4, state_std=torch.tensor([1.0, 0.0, 1.0]))


def test_window_statistics_are_those_of_the_stored_observations():
    obs = torch.tensor([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0], [6.0, 1.0]])
    data = TensorDict({"observation": obs, "action": torch.zeros(4, 1),
                       ("next", "reward"): torch.zeros(4, 1),
                       ("collector", "traj_ids"): torch.tensor([0, 0, 1, 1])},
                      batch_size=[4])  # fmt: skip
    mean, std = TrajectoryWindows(data, 2).state_stats(eps=1e-3)
    torch.testing.assert_close(mean, torch.tensor([3.0, 1.0]))
    torch.testing.assert_close(std, torch.tensor([obs[:, 0].std().item(), 1e-3]))


@pytest.fixture(scope="module")
def random_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("dt_inputs") / "pendulum-random.hdf5"
    collect_dataset(make_env("Pendulum-v1"), None, 400, path, seed=0)
    return path


def test_recipe_normalizes_the_same_way_in_training_and_acting(random_file):
    cfg = dt.Config(dataset=str(random_file), frames=2, hidden=8, n_layer=1, context_length=3,
                    batch_size=4, dropout=0.0)  # fmt: skip
    trainer, policy = dt.make_trainer(cfg, progress_bar=False)
    windows = trainer.collector.dataset
    model = policy.actor.module.model
    mean, std = windows.state_stats()
    torch.testing.assert_close(model.state_mean, mean)
    torch.testing.assert_close(model.state_std, std)
    assert trainer.loss_module.actor_network.module.model is model  # one model, one set of stats
    # acting: the policy's action is the model's prediction on the normalized window
    env = dt.make_eval_env(cfg, num_envs=2)
    with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
        td = env.rollout(4, policy, break_when_any_done=False)
    env.close()
    window = td["context"][:, -1]  # the window the policy acted on at the last step
    reference = BoundedDTActor(DecisionTransformer(3, 1, 3, hidden=8, n_layer=1, dropout=0.0,
                                            max_timestep=cfg.max_timestep),
                        env.action_spec)  # fmt: skip
    state = {k: v for k, v in policy.actor.state_dict().items() if "state_" not in k}
    reference.load_state_dict(state, strict=False)  # the same weights, no statistics
    plain = window.select("observation", "action", "return_to_go", "timestep", "mask").clone()
    plain["observation"] = (plain["observation"] - mean) / std
    with torch.no_grad():
        expected = reference(plain)["action"][:, -1]
    torch.testing.assert_close(td["action"][:, -1], expected)
    # without normalization the model keeps identity statistics
    cfg = dt.Config(dataset=str(random_file), frames=2, hidden=8, n_layer=1, context_length=3,
                    batch_size=4, normalize_states=False)  # fmt: skip
    _, policy = dt.make_trainer(cfg, progress_bar=False)
    assert policy.actor.module.model.state_std.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="normalize_states=True needs the dataset's windows"):
        dt.make_model(dt.Config(dataset=str(random_file)), make_env("Pendulum-v1"))
