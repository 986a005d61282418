"""Seed-era TorchRL loss code, import changed: the parameter API, convert_to_functional,
objectives.utils, DQNLoss(action_space=...), lazy networks, the PPO *_coeff spellings.

Each test is a short user script in the style of TorchRL's SAC/DDPG/TD3/CQL/IQL/DT example
scripts and its "write your own loss" (DDPG) tutorial, checked against a reference built
without the API under test (the networks' own parameters, a plain deep copy, the
canonical keyword).
"""

from __future__ import annotations

import copy

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.data import Bounded, Categorical, OneHot
from torchrl_lite.modules import (
    MLP,
    Actor,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
)
from torchrl_lite.objectives import (
    ClipPPOLoss,
    CQLLoss,
    DDPGLoss,
    DQNLoss,
    DTLoss,
    IQLLoss,
    LossModule,
    SACLoss,
    TD3Loss,
)
from torchrl_lite.objectives import utils as loss_utils
from torchrl_lite.objectives.common import HardUpdate, SoftUpdate, default_value_kwargs
from torchrl_lite.objectives.value import ValueEstimators

OBS, ACT, B = 3, 2, 8


def _tanh_actor():
    net = nn.Sequential(MLP(OBS, 2 * ACT, num_cells=[16]), NormalParamExtractor())
    return ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        spec=Bounded(-1.0, 1.0, shape=(ACT,)),
        return_log_prob=True,
    )


def _qvalue():
    return ValueOperator(MLP(OBS + ACT, 1, num_cells=[16]), in_keys=["observation", "action"])


def _value():
    return ValueOperator(MLP(OBS, 1, num_cells=[16]), in_keys=["observation"])


def _batch(seed=0, batch=(B,)):
    g = torch.Generator().manual_seed(seed)
    nxt = TensorDict(
        observation=torch.randn(*batch, OBS, generator=g),
        reward=torch.randn(*batch, 1, generator=g),
        done=torch.zeros(*batch, 1, dtype=torch.bool),
        terminated=torch.zeros(*batch, 1, dtype=torch.bool),
        batch_size=batch,
    )
    return TensorDict(
        observation=torch.randn(*batch, OBS, generator=g),
        action=torch.rand(*batch, ACT, generator=g) * 2 - 1,
        next=nxt,
        batch_size=batch,
    )


def _leaves(params):
    return list(params.flatten_keys().values())


def _total(losses):
    return sum(v for k, v in losses.items() if k.startswith("loss_"))


# -- <name>_params / target_<name>_params ---------------------------------------------
_LOSSES = {
    "SAC": (
        lambda: SACLoss(_tanh_actor(), _qvalue(), num_qvalue_nets=2),
        ["actor_network", "qvalue_network"],
    ),
    "TD3": (
        lambda: TD3Loss(
            Actor(MLP(OBS, ACT, num_cells=[16]), spec=Bounded(-1.0, 1.0, shape=(ACT,))),
            _qvalue(),
            action_spec=Bounded(-1.0, 1.0, shape=(ACT,)),
        ),
        ["actor_network", "qvalue_network"],
    ),
    "DDPG": (
        lambda: DDPGLoss(Actor(MLP(OBS, ACT, num_cells=[16])), _qvalue()),
        ["actor_network", "value_network"],
    ),
    "CQL": (lambda: CQLLoss(_tanh_actor(), _qvalue()), ["actor_network", "qvalue_network"]),
    "IQL": (
        lambda: IQLLoss(_tanh_actor(), _qvalue(), _value()),
        ["actor_network", "qvalue_network", "value_network"],
    ),
    "DT": (lambda: DTLoss(Actor(nn.Linear(OBS, ACT))), ["actor_network"]),
}


@pytest.mark.parametrize("algo", list(_LOSSES))
def test_params_are_the_networks_own_parameters(algo):
    make, names = _LOSSES[algo]
    loss = make()
    for name in names:
        net = getattr(loss, name)
        leaves = _leaves(getattr(loss, f"{name}_params"))
        own = list(net.parameters())
        assert own and all(any(p is q for q in leaves) for p in own), name
    # together with the loss's own scalars (SAC's log_alpha...), they are loss.parameters()
    covered = {id(p) for n in names for p in _leaves(getattr(loss, f"{n}_params"))}
    rest = [p for p in loss.parameters() if id(p) not in covered]
    assert all(p.dim() == 0 for p in rest), [p.shape for p in rest]


def test_sac_script_optimizers_from_params_train_the_loss():
    """TorchRL's SAC script: one Adam for the actor, one for the critic, built from
    ``*_params``; the reference builds them from the networks' ``parameters()``."""
    torch.manual_seed(0)
    loss = SACLoss(_tanh_actor(), _qvalue(), num_qvalue_nets=2)
    ref = copy.deepcopy(loss)
    actor_opt = torch.optim.Adam(_leaves(loss.actor_network_params), lr=1e-2)
    critic_opt = torch.optim.Adam(_leaves(loss.qvalue_network_params), lr=1e-2)
    ref_actor_opt = torch.optim.Adam(ref.actor_network.parameters(), lr=1e-2)
    ref_critic_opt = torch.optim.Adam(ref.qvalue_network.parameters(), lr=1e-2)
    assert loss.qvalue_network_params.batch_size == torch.Size([2])  # one row per Q-net
    before = [p.detach().clone() for p in loss.actor_network.parameters()]
    for step in range(3):
        batch = _batch(step)
        for lm, opts in ((loss, (actor_opt, critic_opt)), (ref, (ref_actor_opt, ref_critic_opt))):
            torch.manual_seed(step)
            out = lm(batch.clone())
            (out["loss_actor"] + out["loss_qvalue"]).backward()
            for opt in opts:
                opt.step()
                opt.zero_grad()
    assert not all(torch.equal(a, b) for a, b in zip(before, loss.actor_network.parameters()))
    for a, b in zip(loss.parameters(), ref.parameters()):
        torch.testing.assert_close(a, b)


def test_ddpg_script_values_true_true_and_target_params():
    """TorchRL's DDPG script: ``Adam(loss.actor_network_params.values(True, True))``."""
    torch.manual_seed(0)
    loss = DDPGLoss(Actor(MLP(OBS, ACT, num_cells=[16])), _qvalue())
    opt = torch.optim.SGD(loss.value_network_params.values(True, True), lr=0.1)
    target = loss.target_value_network_params
    start = [t.clone() for t in _leaves(target)]
    assert all(torch.equal(a, b) for a, b in zip(start, _leaves(loss.value_network_params)))
    assert not any(t.requires_grad for t in _leaves(target))
    out = loss(_batch())
    out["loss_value"].backward()
    opt.step()
    # the critic moved, its target did not until the updater runs
    assert not all(torch.equal(a, b) for a, b in zip(start, loss.value_network.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(start, _leaves(target)))
    SoftUpdate(loss, tau=1.0).step()
    for a, b in zip(_leaves(loss.target_value_network_params), loss.value_network.parameters()):
        torch.testing.assert_close(a, b)


def test_target_params_update_in_place_reaches_the_target_network():
    loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="one_hot"), delay_value=True)
    with torch.no_grad():
        loss.target_value_network_params.apply(lambda t: t.zero_(), inplace=True)
    td = TensorDict(observation=torch.randn(5, 4), batch_size=[5])
    out = loss.target_value_network(td)["action_value"]
    assert torch.equal(out, torch.zeros(5, 2))


def test_target_params_without_target_are_the_detached_online_values():
    loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="one_hot"), delay_value=False)
    for t, p in zip(_leaves(loss.target_value_network_params), loss.value_network.parameters()):
        assert torch.equal(t, p) and not t.requires_grad


def test_params_follow_loss_to_and_are_reused():
    """Custom losses read ``self.<name>_params`` at every call: the TensorDict is reused,
    and rebuilt once ``loss.to(...)`` replaced the target's buffers."""
    loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="one_hot"), delay_value=True)
    assert loss.value_network_params is loss.value_network_params
    loss.to(torch.float64)
    target = dict(loss.target_value_network.named_buffers())
    leaves = loss.target_value_network_params.flatten_keys()
    assert sorted(leaves.keys()) == sorted(target)
    assert all(leaves[k].data_ptr() == target[k].data_ptr() for k in target)  # same storage
    assert all(t.dtype == torch.float64 for t in leaves.values())
    online = _leaves(loss.value_network_params)
    assert all(any(p is q for q in online) for p in loss.value_network.parameters())


def test_unknown_params_name_raises_attribute_error():
    loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="one_hot"))
    with pytest.raises(AttributeError, match="actor_network_params"):
        _ = loss.actor_network_params


# -- convert_to_functional: a custom loss as in TorchRL's DDPG tutorial ---------------
class _TutorialDDPGLoss(LossModule):
    """The loss of TorchRL's "coding DDPG" tutorial, written against its documented API."""

    def __init__(self, actor_network, value_network):
        super().__init__()
        self.convert_to_functional(actor_network, "actor_network", create_target_params=True)
        self.convert_to_functional(
            value_network,
            "value_network",
            create_target_params=True,
            compare_against=list(actor_network.parameters()),
        )

    def forward(self, td):
        td_copy = td.select("observation")
        with self.actor_network_params.to_module(self.actor_network):
            td_copy = self.actor_network(td_copy)
        with self.value_network_params.detach().to_module(self.value_network):
            td_copy = self.value_network(td_copy)
        loss_actor = -td_copy["state_action_value"].mean()
        nxt = td["next"].select("observation")
        with self.target_actor_network_params.to_module(self.actor_network):
            nxt = self.actor_network(nxt)
        with self.target_value_network_params.to_module(self.value_network):
            nxt = self.value_network(nxt)
        target = td["next", "reward"] + 0.99 * nxt["state_action_value"]
        value = self.value_network(td.select("observation", "action"))["state_action_value"]
        loss_value = (value - target.detach()).pow(2).mean()
        return TensorDict(loss_actor=loss_actor, loss_value=loss_value)


def test_convert_to_functional_tutorial_loss():
    torch.manual_seed(0)
    actor = Actor(MLP(OBS, ACT, num_cells=[16]))
    value = _qvalue()
    frozen_actor, frozen_value = copy.deepcopy(actor), copy.deepcopy(value)  # reference
    loss = _TutorialDDPGLoss(actor, value)
    opt = torch.optim.SGD(_leaves(loss.actor_network_params), lr=0.5)
    batch = _batch()
    out = loss(batch)
    out["loss_actor"].backward()
    # the actor term trains the actor only (the critic's params were detached)
    assert all(p.grad is not None for p in actor.parameters())
    assert all(p.grad is None for p in value.parameters())
    opt.step()
    assert not torch.equal(actor.module[0].weight, frozen_actor.module[0].weight)
    # the target params still give the original networks' outputs
    nxt = batch["next"].select("observation")
    with loss.target_actor_network_params.to_module(loss.actor_network):
        got = loss.actor_network(nxt.clone())["action"]
    torch.testing.assert_close(got, frozen_actor(nxt.clone())["action"])
    td = batch.select("observation", "action")
    with loss.target_value_network_params.to_module(loss.value_network):
        got = loss.value_network(td.clone())["state_action_value"]
    torch.testing.assert_close(got, frozen_value(td.clone())["state_action_value"])
    HardUpdate(loss, value_network_update_interval=1).step()  # updaters see these targets
    with loss.target_actor_network_params.to_module(loss.actor_network):
        got = loss.actor_network(nxt.clone())["action"]
    torch.testing.assert_close(got, actor(nxt.clone())["action"])


def test_convert_to_functional_expand_dim_and_shared_parameters():
    class TwinQ(LossModule):
        def __init__(self, qnet, compare_against=None):
            super().__init__()
            self.convert_to_functional(
                qnet, "qvalue_network", expand_dim=2, compare_against=compare_against
            )

    loss = TwinQ(_qvalue())
    assert loss.qvalue_network_params.batch_size == torch.Size([2])
    out = loss.qvalue_network(_batch().select("observation", "action"))
    assert out["state_action_value"].shape == torch.Size([2, B, 1])
    trunk = nn.Linear(OBS + ACT, 8)
    shared = ValueOperator(nn.Sequential(trunk, nn.Linear(8, 1)), in_keys=["observation", "action"])
    with pytest.raises(ValueError, match="shares parameters .* with compare_against"):
        TwinQ(shared, compare_against=trunk)


# -- objectives.utils -----------------------------------------------------------------
def test_objectives_utils_reexports():
    assert loss_utils.SoftUpdate is SoftUpdate and loss_utils.HardUpdate is HardUpdate
    assert loss_utils.ValueEstimators is ValueEstimators
    assert loss_utils.default_value_kwargs is default_value_kwargs
    assert default_value_kwargs(ValueEstimators.TD0) == {"gamma": 0.99}
    hp = default_value_kwargs(ValueEstimators.TDLambda)
    hp["gamma"] = 0.9  # a copy: the defaults stay
    assert default_value_kwargs(ValueEstimators.TDLambda) == {"gamma": 0.99, "lmbda": 0.95}
    # TorchRL's custom-loss idiom: the defaults, updated, given to make_value_estimator
    loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="one_hot"))
    loss.make_value_estimator(
        ValueEstimators.TD0, **{**default_value_kwargs(ValueEstimators.TD0), "gamma": 0.5}
    )
    assert loss.value_estimator.gamma == 0.5
    with pytest.raises(TypeError, match="ValueEstimators member"):
        default_value_kwargs("td0")


# -- DQNLoss(action_space=...) ----------------------------------------------------------
def _dqn_batch(one_hot: bool):
    g = torch.Generator().manual_seed(3)
    index = torch.randint(3, (B,), generator=g)
    action = nn.functional.one_hot(index, 3) if one_hot else index
    return TensorDict(
        observation=torch.randn(B, 4, generator=g),
        action=action,
        next=TensorDict(
            observation=torch.randn(B, 4, generator=g),
            reward=torch.randn(B, 1, generator=g),
            done=torch.zeros(B, 1, dtype=torch.bool),
            terminated=torch.zeros(B, 1, dtype=torch.bool),
            batch_size=[B],
        ),
        batch_size=[B],
    )


@pytest.mark.parametrize(
    "alias, canonical",
    [(OneHot(3), "one_hot"), ("one-hot", "one_hot"), (Categorical(3), "categorical")],
)
def test_dqn_action_space_alias_equals_canonical(alias, canonical):
    torch.manual_seed(0)
    net = nn.Linear(4, 3)
    ref = DQNLoss(QValueActor(copy.deepcopy(net), action_space=canonical), action_space=canonical)
    got = DQNLoss(QValueActor(copy.deepcopy(net), action_space=canonical), action_space=alias)
    assert got.action_space == canonical
    batch = _dqn_batch(canonical == "one_hot")
    torch.testing.assert_close(got(batch.clone())["loss"], ref(batch.clone())["loss"])


def test_dqn_action_space_bad_value_names_the_choices():
    with pytest.raises(ValueError, match=r"action_space must be one of .*'binary'"):
        DQNLoss(QValueActor(nn.Linear(4, 3), action_space="one_hot"), action_space="binary")


# -- lazy networks ----------------------------------------------------------------------
def test_lazy_network_with_target_says_to_materialize_first():
    qnet = QValueActor(MLP(out_features=3, num_cells=[8]), action_space="one_hot")
    with pytest.raises(
        ValueError, match=r"value_network has uninitialized \(lazy\).*Run the network once"
    ):
        DQNLoss(qnet, delay_value=True)
    qnet(TensorDict(observation=torch.zeros(1, 4), batch_size=[1]))  # materialize, as advised
    loss = DQNLoss(qnet, delay_value=True)
    for t, p in zip(_leaves(loss.target_value_network_params), qnet.parameters()):
        assert torch.equal(t, p)


def test_lazy_qvalue_ensemble_raises_and_lazy_actor_without_target_is_fine():
    lazy_q = ValueOperator(MLP(out_features=1, num_cells=[8]), in_keys=["observation", "action"])
    with pytest.raises(ValueError, match=r"qvalue_network has uninitialized.*2 ensemble copies"):
        SACLoss(_tanh_actor(), lazy_q, num_qvalue_nets=2)
    # PPO copies nothing: a lazy actor is materialized by its first call, as in TorchRL
    net = nn.Sequential(MLP(out_features=2 * ACT, num_cells=[8]), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        return_log_prob=True,
    )
    loss = ClipPPOLoss(actor, _value())
    batch = actor(TensorDict(observation=torch.randn(B, OBS), batch_size=[B]))
    batch["advantage"], batch["value_target"] = torch.randn(B, 1), torch.randn(B, 1)
    _total(loss(batch)).backward()
    assert all(p.grad is not None for p in _leaves(loss.actor_network_params) if p.requires_grad)


# -- ClipPPOLoss(entropy_coeff=, critic_coeff=) -----------------------------------------
def test_ppo_coeff_spelling_equals_coef():
    torch.manual_seed(0)
    actor, critic = _tanh_actor(), _value()
    batch = actor(TensorDict(observation=torch.randn(B, OBS), batch_size=[B]))
    batch["advantage"], batch["value_target"] = torch.randn(B, 1), torch.randn(B, 1)
    ref = ClipPPOLoss(actor, critic, entropy_coef=0.05, critic_coef=0.5)
    got = ClipPPOLoss(actor, critic, entropy_coeff=0.05, critic_coeff=0.5)
    assert torch.equal(got.entropy_coef, ref.entropy_coef)
    assert torch.equal(got.critic_coef, ref.critic_coef) and float(got.critic_coef) == 0.5
    torch.manual_seed(1)
    want = ref(batch.clone())
    torch.manual_seed(1)
    have = got(batch.clone())
    for key in ("loss_critic", "loss_entropy", "loss_objective"):
        torch.testing.assert_close(have[key], want[key])
    with pytest.raises(TypeError, match="both entropy_coef=0.1 and entropy_coeff=0.2"):
        ClipPPOLoss(actor, critic, entropy_coef=0.1, entropy_coeff=0.2)


@pytest.mark.gpu
def test_params_follow_the_loss_to_cuda():
    """TorchRL scripts move the loss first, then build the optimizers from ``*_params``."""
    torch.manual_seed(0)
    loss = SACLoss(_tanh_actor(), _qvalue(), num_qvalue_nets=2).to("cuda")
    opt = torch.optim.Adam(_leaves(loss.actor_network_params), lr=1e-2)
    assert all(p.is_cuda for p in _leaves(loss.actor_network_params))
    assert all(t.is_cuda for t in _leaves(loss.target_qvalue_network_params))
    before = [p.detach().clone() for p in loss.actor_network.parameters()]
    loss(_batch().to("cuda"))["loss_actor"].backward()
    opt.step()
    assert not all(torch.equal(a, b) for a, b in zip(before, loss.actor_network.parameters()))
    SoftUpdate(loss, tau=1.0).step()
    for t, p in zip(
        _leaves(loss.target_qvalue_network_params), _leaves(loss.qvalue_network_params)
    ):
        torch.testing.assert_close(t, p.detach())
