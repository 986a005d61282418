"""TensorDict modules: SafeModule, actors, value operators, shared trunks, Q-value actors."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

import torchrl_lite.modules as modules_pkg
from torchrl_lite.data import Bounded, Categorical, Composite, OneHot
from torchrl_lite.modules import (
    MLP,
    Actor,
    ActorCriticOperator,
    ActorCriticWrapper,
    ActorValueOperator,
    ConvNet,
    DistributionalQValueActor,
    DistributionalQValueModule,
    ExplorationType,
    NormalParamsWrapper,
    ProbabilisticActor,
    QValueActor,
    QValueModule,
    SafeModule,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    SafeSequential,
    TanhNormal,
    ValueOperator,
    set_exploration_type,
)

MODULE_CLASSES = [
    "SafeModule",
    "SafeSequential",
    "Actor",
    "ProbabilisticActor",
    "ValueOperator",
    "ActorValueOperator",
    "ActorCriticOperator",
    "ActorCriticWrapper",
    "QValueModule",
    "QValueActor",
    "DistributionalQValueModule",
    "DistributionalQValueActor",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
]


def _ppo_actor_critic():
    """The seed's PPO actor and critic, as written (import paths changed)."""
    model = TensorDictModule(
        nn.Sequential(
            nn.Linear(3, 128),
            nn.Tanh(),
            nn.Linear(128, 128),
            nn.Tanh(),
            nn.Linear(128, 128),
            nn.Tanh(),
            nn.Linear(128, 2),
            NormalParamExtractor(),
        ),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    critic = ValueOperator(
        nn.Sequential(
            nn.Linear(3, 128),
            nn.Tanh(),
            nn.Linear(128, 128),
            nn.Tanh(),
            nn.Linear(128, 128),
            nn.Tanh(),
            nn.Linear(128, 1),
        ),
        in_keys=["observation"],
    )
    actor = ProbabilisticActor(
        model,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True,
    )
    return actor, critic


def _pixel_actor_value():
    """The seed's pixel actor-critic, as written (import paths changed)."""
    common_module = ConvNet(
        bias_last_layer=True,
        depth=None,
        num_cells=[32, 64, 64],
        kernel_sizes=[8, 4, 3],
        strides=[4, 2, 1],
    )
    common_module = SafeModule(
        common_module,
        in_keys=["pixels"],
        out_keys=["hidden"],
    )
    policy_module = SafeModule(
        NormalParamsWrapper(MLP(num_cells=[64, 64], out_features=32, activation=nn.ELU)),
        in_keys=["hidden"],
        out_keys=["loc", "scale"],
    )
    policy_module = SafeProbabilisticTensorDictSequential(
        policy_module,
        SafeProbabilisticModule(
            in_keys=["loc", "scale"],
            out_keys="action",
            distribution_class=TanhNormal,
        ),
    )
    value_module = MLP(
        num_cells=[64, 64],
        out_features=1,
        activation=nn.ELU,
    )
    actor_value = ActorValueOperator(common_module, policy_module, value_module)
    standalone_policy = actor_value.get_policy_operator()
    return actor_value, standalone_policy


def _pixels(batch: int = 4) -> TensorDict:
    return TensorDict(pixels=torch.rand(batch, 3, 84, 84), batch_size=[batch])


def _obs(batch: int = 4, dim: int = 3) -> TensorDict:
    return TensorDict(observation=torch.randn(batch, dim), batch_size=[batch])


# -- the seed's snippets ----------------------------------------------------------------
def test_ppo_actor_critic_run_on_pendulum_reset():
    from torchrl_lite.envs.libs.gym import GymEnv

    actor, critic = _ppo_actor_critic()
    env = GymEnv("Pendulum-v1")
    td = env.reset()
    td = critic(actor(td))
    assert td["action"].shape == (1,)
    assert td["state_value"].shape == (1,)
    assert "sample_log_prob" in td.keys()
    assert bool(td["action"].abs().max() <= 1.0)
    env.close()


def test_ppo_actor_critic_batched_input():
    actor, critic = _ppo_actor_critic()
    with set_exploration_type(ExplorationType.RANDOM):
        td = critic(actor(_obs(16)))
    assert td["action"].shape == (16, 1)
    assert td["sample_log_prob"].shape == (16,)
    assert td["state_value"].shape == (16, 1)


def test_probabilistic_actor_log_prob_equals_distribution_log_prob():
    torch.manual_seed(0)
    actor, _ = _ppo_actor_critic()
    with set_exploration_type(ExplorationType.RANDOM):
        td = actor(_obs(64))
    dist = actor.get_dist(td.clone())
    torch.testing.assert_close(td["sample_log_prob"], dist.log_prob(td["action"]))


def test_probabilistic_actor_log_prob_with_torch_normal():
    torch.manual_seed(0)
    net = TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), NormalParamExtractor()), ["observation"], ["loc", "scale"]
    )
    actor = ProbabilisticActor(
        net,
        in_keys=["loc", "scale"],
        distribution_class=torch.distributions.Normal,
        return_log_prob=True,
        default_interaction_type=ExplorationType.RANDOM,
    )
    td = actor(_obs(8))
    expected = torch.distributions.Normal(td["loc"], td["scale"]).log_prob(td["action"])
    torch.testing.assert_close(td["sample_log_prob"], expected)
    assert "action_log_prob" not in td.keys()


def test_probabilistic_actor_deterministic_is_mode_random_samples():
    torch.manual_seed(0)
    actor, _ = _ppo_actor_critic()
    obs = _obs(8)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        first = actor(obs.clone())["action"]
        second = actor(obs.clone())["action"]
    torch.testing.assert_close(first, second)
    dist = actor.get_dist(obs.clone())
    torch.testing.assert_close(first, dist.deterministic_sample)
    with set_exploration_type(ExplorationType.RANDOM):
        sampled = actor(obs.clone())["action"]
    assert not torch.allclose(sampled, first)


def test_pixel_actor_value_operator_on_fake_batch():
    actor_value, standalone_policy = _pixel_actor_value()
    td = actor_value(_pixels(4))
    assert td["hidden"].shape[0] == 4
    assert td["action"].shape == (4, 16)
    assert td["state_value"].shape == (4, 1)
    assert bool(td["action"].abs().max() <= 1.0)
    out = standalone_policy(_pixels(2))
    assert out["action"].shape == (2, 16)
    assert "state_value" not in out.keys()
    dist = standalone_policy.get_dist(_pixels(2))
    assert dist.sample().shape == (2, 16)
    value = actor_value.get_value_operator()(_pixels(2))
    assert value["state_value"].shape == (2, 1) and "action" not in value.keys()


def test_actor_value_operator_operators_share_parameters():
    actor_value, policy = _pixel_actor_value()
    actor_value(_pixels(1))  # materialise lazy layers
    value = actor_value.get_value_operator()
    all_ids = {id(p) for p in actor_value.parameters()}
    policy_ids = {id(p) for p in policy.parameters()}
    value_ids = {id(p) for p in value.parameters()}
    trunk_ids = {id(p) for p in actor_value.module[0].parameters()}
    assert trunk_ids and trunk_ids <= policy_ids and trunk_ids <= value_ids
    assert policy_ids | value_ids == all_ids
    # a gradient through the standalone policy reaches the shared trunk
    policy(_pixels(2))["loc"].sum().backward()
    assert actor_value.module[0].module.parameters().__next__().grad is not None


def test_actor_value_operator_heads():
    trunk = SafeModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    av = ActorValueOperator(trunk, nn.Linear(8, 1), nn.Linear(8, 1))
    assert isinstance(av.get_policy_head(), Actor)
    assert isinstance(av.get_value_head(), ValueOperator)
    assert av.get_policy_head().in_keys == ["hidden"]
    td = av(_obs(5))
    assert set(td.keys()) == {"observation", "hidden", "action", "state_value"}


def test_actor_critic_operator_critic_reads_action():
    trunk = SafeModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    q_head = ValueOperator(
        MLP(in_features=9, out_features=1, num_cells=[16]), in_keys=["hidden", "action"]
    )
    ac = ActorCriticOperator(trunk, Actor(nn.Linear(8, 1), in_keys=["hidden"]), q_head)
    td = ac(_obs(4))
    assert td["state_action_value"].shape == (4, 1)
    critic = ac.get_critic_operator()
    given = _obs(4).set("action", torch.ones(4, 1))
    out = critic(given)
    torch.testing.assert_close(out["action"], torch.ones(4, 1))  # the input action is kept
    assert ac.get_value_operator() is ac
    assert {id(p) for p in critic.parameters()} <= {id(p) for p in ac.parameters()}


def test_actor_critic_operator_wraps_plain_value_head_with_action():
    trunk = SafeModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    ac = ActorCriticOperator(
        trunk, nn.Linear(8, 1), MLP(in_features=9, out_features=1, num_cells=[4])
    )
    assert ac.get_value_head().in_keys == ["hidden", "action"]
    assert ac(_obs(2))["state_action_value"].shape == (2, 1)


def test_actor_critic_wrapper():
    policy, value = Actor(nn.Linear(3, 1)), ValueOperator(nn.Linear(3, 1))
    ac = ActorCriticWrapper(policy, value)
    assert ac.get_policy_operator() is policy and ac.get_value_operator() is value
    assert set(ac(_obs(2)).keys()) == {"observation", "action", "state_value"}


# -- keys -----------------------------------------------------------------------------------
def test_value_operator_keys():
    assert ValueOperator(nn.Linear(3, 1)).out_keys == ["state_value"]
    assert ValueOperator(nn.Linear(3, 1)).in_keys == ["observation"]
    qnet = ValueOperator(
        lambda o, a: o.sum(-1, keepdim=True) + a, in_keys=["observation", "action"]
    )
    assert qnet.out_keys == ["state_action_value"]
    td = qnet(_obs(3).set("action", torch.ones(3, 1)))
    assert td["state_action_value"].shape == (3, 1)
    custom = ValueOperator(nn.Linear(3, 1), out_keys=["my_value"])
    assert "my_value" in custom(_obs(2)).keys()


def test_actor_default_keys_and_spec():
    actor = Actor(nn.Linear(3, 2), spec=Bounded(-1.0, 1.0, shape=(2,)))
    assert actor.in_keys == ["observation"] and actor.out_keys == ["action"]
    assert isinstance(actor.spec, Composite) and isinstance(actor.spec["action"], Bounded)
    assert actor(_obs(4))["action"].shape == (4, 2)


# -- safe / unsafe --------------------------------------------------------------------------
def _big_linear() -> nn.Linear:
    lin = nn.Linear(3, 1)
    nn.init.constant_(lin.weight, 10.0)
    nn.init.constant_(lin.bias, 10.0)
    return lin


def test_safe_module_projects_outputs_outside_spec():
    spec = Bounded(-1.0, 1.0, shape=(1,))
    safe = SafeModule(_big_linear(), ["observation"], ["action"], spec=spec, safe=True)
    td = safe(TensorDict(observation=torch.ones(5, 3), batch_size=[5]))
    torch.testing.assert_close(td["action"], torch.ones(5, 1))
    assert spec.is_in(td["action"])


def test_unsafe_module_passes_outputs_through_unchanged():
    spec = Bounded(-1.0, 1.0, shape=(1,))
    unsafe = SafeModule(_big_linear(), ["observation"], ["action"], spec=spec, safe=False)
    td = unsafe(TensorDict(observation=torch.ones(5, 3), batch_size=[5]))
    torch.testing.assert_close(td["action"], torch.full((5, 1), 40.0))
    assert not spec.is_in(td["action"])


def test_safe_probabilistic_module_projects_sample():
    spec = Bounded(-0.5, 0.5, shape=(1,))
    mod = SafeProbabilisticModule(
        in_keys=["loc", "scale"],
        out_keys="action",
        spec=spec,
        safe=True,
        distribution_class=torch.distributions.Normal,
    )
    td = mod(TensorDict(loc=torch.full((4, 1), 3.0), scale=torch.ones(4, 1), batch_size=[4]))
    torch.testing.assert_close(td["action"], torch.full((4, 1), 0.5))
    unsafe = ProbabilisticActor(
        TensorDictModule(
            lambda o: (o[..., :1] + 3, o[..., 1:2].abs() + 1), ["observation"], ["loc", "scale"]
        ),
        in_keys=["loc", "scale"],
        spec=spec,
        distribution_class=torch.distributions.Normal,
    )
    out = unsafe(TensorDict(observation=torch.zeros(4, 3), batch_size=[4]))
    torch.testing.assert_close(out["action"], torch.full((4, 1), 3.0))
    assert isinstance(unsafe.spec["action"], Bounded)


def test_safe_without_spec_raises():
    with pytest.raises(ValueError, match="spec is None"):
        SafeModule(nn.Linear(3, 1), ["observation"], ["action"], safe=True)


def test_leaf_spec_with_several_out_keys_raises():
    with pytest.raises(ValueError, match="Composite"):
        SafeModule(
            nn.Linear(3, 1), ["observation"], ["a", "b"], spec=Bounded(-1.0, 1.0, shape=(1,))
        )


# -- Q-value actors -------------------------------------------------------------------------
@pytest.mark.parametrize("action_space", ["one_hot", "categorical"])
def test_qvalue_actor_picks_argmax_and_writes_chosen_value(action_space):
    torch.manual_seed(0)
    actor = QValueActor(nn.Linear(4, 5), action_space=action_space)
    td = actor(_obs(10, dim=4))
    values = td["action_value"]
    best = values.argmax(-1)
    if action_space == "one_hot":
        assert td["action"].shape == (10, 5)
        torch.testing.assert_close(td["action"], torch.nn.functional.one_hot(best, 5))
    else:
        assert td["action"].shape == (10,)
        torch.testing.assert_close(td["action"], best)
    torch.testing.assert_close(td["chosen_action_value"], values.max(-1, keepdim=True).values)


def test_qvalue_actor_action_space_from_spec():
    assert QValueActor(nn.Linear(4, 3), spec=OneHot(3)).action_space == "one_hot"
    assert QValueActor(nn.Linear(4, 3), spec=Categorical(3)).action_space == "categorical"
    assert QValueActor(nn.Linear(4, 3), spec=Composite(action=OneHot(3))).action_space == "one_hot"


def test_qvalue_module_respects_action_mask():
    mod = QValueModule(action_space="categorical", action_mask_key="action_mask")
    td = TensorDict(
        action_value=torch.tensor([[0.0, 5.0, 1.0]]),
        action_mask=torch.tensor([[True, False, True]]),
        batch_size=[1],
    )
    out = mod(td)
    assert out["action"].tolist() == [2]
    assert out["chosen_action_value"].tolist() == [[1.0]]


def test_distributional_qvalue_actor_uses_expected_value():
    support = torch.tensor([-1.0, 0.0, 1.0])
    # logits [B, atoms=3, actions=2]: action 0 mass on -1, action 1 mass on +1
    logits = torch.tensor([[[5.0, -5.0], [0.0, 0.0], [-5.0, 5.0]]])
    actor = DistributionalQValueActor(
        TensorDictModule(
            lambda o: logits.expand(o.shape[0], 3, 2), ["observation"], ["action_value"]
        ),
        support=support,
        action_space="categorical",
    )
    td = actor(_obs(2))
    assert td["action"].tolist() == [1, 1]
    torch.testing.assert_close(td["action_value"].exp().sum(-2), torch.ones(2, 2))
    one_hot = DistributionalQValueModule("one_hot", support)
    out = one_hot(TensorDict(action_value=logits.log_softmax(-2), batch_size=[1]))
    assert out["action"].tolist() == [[0, 1]]


# -- bad input --------------------------------------------------------------------------------
def _assert_missing_key(
    err: pytest.ExceptionInfo, key: str, module: str, present: str, match: str | None
):
    text = str(err.value)
    assert repr(key) in text, text
    assert module in text, text
    assert present in text, text
    if match is not None:
        assert f"Did you mean {match!r}" in text, text


def test_safe_module_missing_in_key_names_key_module_and_match():
    mod = SafeModule(nn.Linear(3, 1), in_keys=["observation"], out_keys=["action"])
    with pytest.raises(KeyError) as err:
        mod(TensorDict(observations=torch.zeros(3)))
    _assert_missing_key(err, "observation", "SafeModule(Linear)", "observations", "observations")


@pytest.mark.parametrize(
    "build, name",
    [
        (lambda: Actor(nn.Linear(3, 1)), "Actor(Linear)"),
        (lambda: ValueOperator(nn.Linear(3, 1)), "ValueOperator(Linear)"),
        (lambda: QValueActor(nn.Linear(3, 2), action_space="one_hot"), "SafeModule(Linear)"),
        (lambda: _ppo_actor_critic()[0], "TensorDictModule(Sequential)"),
    ],
)
def test_actors_missing_in_key_raise_key_error(build, name):
    module = build()
    with pytest.raises(KeyError) as err:
        module(TensorDict(obs=torch.zeros(2, 3), batch_size=[2]))
    _assert_missing_key(err, "observation", name, "obs", None)


def test_probabilistic_module_missing_parameter_entry():
    mod = SafeProbabilisticModule(
        in_keys=["loc", "scale"], out_keys="action", distribution_class=torch.distributions.Normal
    )
    with pytest.raises(KeyError) as err:
        mod(TensorDict(loc=torch.zeros(3), scales=torch.ones(3)))
    _assert_missing_key(err, "scale", "SafeProbabilisticModule", "scales", "scales")


def test_sequence_missing_key_names_the_module_that_reads_it():
    seq = SafeSequential(
        TensorDictModule(nn.Linear(3, 4), ["observation"], ["hidden"]),
        TensorDictModule(nn.Linear(4, 1), ["hiden"], ["out"]),
    )
    with pytest.raises(KeyError) as err:
        seq(_obs(2))
    _assert_missing_key(err, "hiden", "module 1 of SafeSequential", "hidden", "hidden")


def test_qvalue_module_missing_action_value():
    with pytest.raises(KeyError) as err:
        QValueModule(action_space="one_hot")(
            TensorDict(action_values=torch.zeros(2, 3), batch_size=[2])
        )
    _assert_missing_key(err, "action_value", "QValueModule", "action_values", "action_values")


def test_probabilistic_actor_distribution_lacking_parameters():
    net = TensorDictModule(nn.Linear(3, 1), ["observation"], ["loc"])
    with pytest.raises(
        ValueError, match=r"TanhNormal needs the parameters \['loc', 'scale'\].*\['scale'\]"
    ):
        ProbabilisticActor(net, in_keys=["loc"], distribution_class=TanhNormal)
    with pytest.raises(ValueError, match="does not accept the parameters"):
        ProbabilisticActor(net, in_keys=["loc", "scale", "mu"], distribution_class=TanhNormal)
    # a constant parameter in distribution_kwargs is fine
    ok = ProbabilisticActor(
        net,
        in_keys=["loc"],
        distribution_class=torch.distributions.Normal,
        distribution_kwargs={"scale": 1.0},
    )
    assert ok(_obs(2))["action"].shape == (2, 1)


def test_probabilistic_actor_needs_a_tensordict_module():
    with pytest.raises(TypeError, match="TensorDictModule"):
        ProbabilisticActor(nn.Linear(3, 2), in_keys=["loc", "scale"], distribution_class=TanhNormal)


def test_actor_value_operator_needs_a_tensordict_trunk():
    with pytest.raises(TypeError, match="common operator"):
        ActorValueOperator(nn.Linear(3, 8), nn.Linear(8, 1), nn.Linear(8, 1))


def test_actor_critic_operator_value_without_action_raises():
    trunk = SafeModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    with pytest.raises(ValueError, match="must read 'action'"):
        ActorCriticOperator(
            trunk, nn.Linear(8, 1), ValueOperator(nn.Linear(8, 1), in_keys=["hidden"])
        )


def test_qvalue_unknown_action_space():
    with pytest.raises(ValueError, match="action_space must be one of"):
        QValueActor(nn.Linear(3, 2), action_space="onehot")
    with pytest.raises(ValueError, match="pass action_space"):
        QValueActor(nn.Linear(3, 2))


# -- exports --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODULE_CLASSES)
def test_module_classes_exported(name):
    from torchrl_lite.modules import tensordict_module

    assert getattr(modules_pkg, name) is getattr(tensordict_module, name)
    assert name in modules_pkg.__all__
