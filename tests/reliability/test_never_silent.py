"""Bad inputs that used to pass without a word or with a raw torch message: an action beyond
its bounds after the first step, a transform whose keys are absent, a non-positive scale,
a network fed the wrong width, ListStorage items of mixed shapes."""

from __future__ import annotations

import warnings

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule

from torchrl_lite.data.replay_buffers import ListStorage, ReplayBuffer
from torchrl_lite.envs import DoubleToFloat, GymEnv, PendulumEnv, SerialEnv, TransformedEnv
from torchrl_lite.envs._action_bounds import ActionBoundsWarning
from torchrl_lite.envs.utils import step_mdp
from torchrl_lite.modules import (
    MLP,
    IndependentNormal,
    ProbabilisticActor,
    TanhNormal,
    TruncatedNormal,
    ValueOperator,
)
from torchrl_lite.objectives import ClipPPOLoss

ENVS = {
    "gym": lambda **kw: GymEnv("Pendulum-v1", **kw),
    "torch": lambda **kw: PendulumEnv(**kw),
    "serial": lambda **kw: SerialEnv(2, lambda: GymEnv("Pendulum-v1"), **kw),
}


def step_with(env, values) -> list:
    """Step ``env`` with constant actions ``values`` in turn; the warnings raised."""
    td = env.reset()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for value in values:
            td.set("action", torch.full(env.action_spec.shape, value))
            td = step_mdp(env.step(td))
    return [w for w in caught if issubclass(w.category, ActionBoundsWarning)]


@pytest.mark.parametrize("kind", list(ENVS))
@pytest.mark.parametrize("bad", [2.5, -7.0, float("nan")])
def test_an_action_beyond_its_bounds_after_the_first_step_warns_once(kind, bad):
    env = ENVS[kind]()
    caught = step_with(env, [0.5, 1.0, bad, bad, 0.0])
    assert len(caught) == 1  # once per env and key
    message = str(caught[0].message)
    assert "action 'action' has values beyond its spec's bounds" in message
    assert f"max {bad:.4g}" in message or f"min {bad:.4g}" in message


@pytest.mark.parametrize("kind", list(ENVS))
def test_strict_raises_on_a_later_step(kind):
    env = ENVS[kind](spec_check="strict")
    with pytest.raises(ValueError, match=r"beyond its spec's bounds \(min 3, max 3.*strict"):
        step_with(env, [0.5, 3.0])


def test_in_bounds_actions_and_never_stay_silent():
    assert step_with(ENVS["gym"](), [0.5, -2.0, 2.0, 1.0]) == []
    assert step_with(ENVS["gym"](spec_check="never"), [0.5, 9.0]) == []


def test_a_rollout_checks_its_actions_once_per_batch():
    env = GymEnv("Pendulum-v1")
    policy = iter([0.0, 0.0, 5.0, 0.0, 0.0])

    def act(td):
        return td.set("action", torch.full((1,), next(policy)))

    with pytest.warns(ActionBoundsWarning, match="max 5"):
        env.rollout(5, act, break_when_any_done=False)
    assert env._bounds_per_batch is False  # per-step checks back on after the rollout


def test_a_transform_whose_keys_are_absent_warns_naming_the_keys_present():
    with pytest.warns(UserWarning, match=r"in_keys entry 'obs' is not in the specs.*'observation'"):
        env = TransformedEnv(GymEnv("Pendulum-v1"), DoubleToFloat(in_keys=["obs"]))
    assert env.rollout(2).batch_size == (2,)  # still skipped, as in TorchRL


@pytest.mark.parametrize("cls", [TanhNormal, IndependentNormal, TruncatedNormal])
@pytest.mark.parametrize("scale", [-1.0, 0.0, float("nan")])
def test_a_distribution_refuses_a_scale_that_is_not_positive(cls, scale):
    scale = torch.tensor([0.5, scale])
    with pytest.raises(ValueError, match=rf"{cls.__name__}: scale must be > 0.*1 of 2 entries"):
        cls(torch.zeros(2), scale)
    cls(torch.zeros(2), torch.tensor([0.5, 1e-6]))  # positive: fine


def test_a_value_network_fed_the_wrong_width_names_module_keys_and_shapes():
    value = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
    with pytest.raises(ValueError) as info:
        value(TensorDict(observation=torch.zeros(5, 4), batch_size=[5]))
    message = str(info.value)
    assert message.startswith("ValueOperator(MLP) (in_keys ['observation']) got 'observation'")
    assert "[5, 4]" in message and "takes 3 features in the last dimension" in message


def make_actor():
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor())
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"])
    return ProbabilisticActor(
        module, in_keys=["loc", "scale"], distribution_class=TanhNormal, return_log_prob=True
    )


def test_an_actor_fed_the_wrong_width_names_its_module():
    with pytest.raises(ValueError, match=r"module 0 of ProbabilisticActor: TensorDictModule\("
                       r"Sequential\) \(in_keys \['observation'\]\) got 'observation' \[5, 4\]"):  # fmt: skip
        make_actor()(TensorDict(observation=torch.zeros(5, 4), batch_size=[5]))


def test_a_loss_fed_the_wrong_width_names_the_network():
    critic = ValueOperator(MLP(in_features=3, out_features=1, num_cells=[8]), ["observation"])
    loss = ClipPPOLoss(make_actor(), critic)
    batch = TensorDict(
        observation=torch.zeros(5, 4), action=torch.zeros(5, 1),
        sample_log_prob=torch.zeros(5), advantage=torch.zeros(5, 1),
        value_target=torch.zeros(5, 1), batch_size=[5],
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"got 'observation' \[5, 4\].*takes 3 features"):
        loss(batch)


def test_list_storage_items_of_mixed_shapes_name_the_entries():
    buffer = ReplayBuffer(storage=ListStorage(10))
    for width in (3, 4, 3):
        buffer.add(torch.zeros(width))
    with pytest.raises(ValueError, match=r"the items have shapes \[3\] in items \[0, 2\]; "
                       r"\[4\] in items \[1\]"):  # fmt: skip
        buffer[[0, 1, 2]]
    buffer = ReplayBuffer(storage=ListStorage(10))
    buffer.add(TensorDict(a=torch.zeros(3), b=torch.zeros(2)))
    buffer.add(TensorDict(a=torch.zeros(4), b=torch.zeros(2)))
    with pytest.raises(ValueError, match=r"entry 'a' has shapes \[3\] in items \[0\]; \[4\]"):
        buffer[[0, 1]]


def test_a_checkpoint_with_corrupt_metadata_says_so_and_names_the_file(tmp_path):
    from torchrl_lite.trainers import load_checkpoint, save_checkpoint

    path = save_checkpoint(tmp_path / "ckpt", {"step": torch.tensor(1)})
    (path / "meta.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"corrupt or incomplete checkpoint .*meta.json is "
                       r"missing or is not valid JSON.*no older complete copy"):  # fmt: skip
        load_checkpoint(path)
