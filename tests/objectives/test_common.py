"""LossModule base: keys, target networks, SoftUpdate / HardUpdate, value estimators,
ensembles, detached calls and the errors bad input gets."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from tests.objectives.loss_nets import critic, gaussian_actor, qvalue_actor, transitions
from torchrl_lite.modules import (
    MLP,
    ActorValueOperator,
    ProbabilisticActor,
    SafeModule,
    ValueOperator,
)
from torchrl_lite.objectives import (
    ClipPPOLoss,
    DQNLoss,
    HardUpdate,
    LossModule,
    SoftUpdate,
    ValueEstimators,
)
from torchrl_lite.objectives.common import Ensemble
from torchrl_lite.objectives.value import GAE, TD0Estimator, TDLambdaEstimator


class _ValueLoss(LossModule):
    """A minimal loss: squared error of a value network against ``"value_target"``."""

    @dataclass
    class _AcceptedKeys:
        value: str = "state_value"
        value_target: str = "value_target"
        reward: str = "reward"
        done: str = "done"
        terminated: str = "terminated"

    default_value_estimator = ValueEstimators.TD0

    def __init__(self, value_network, delay_value=True, gamma=None):
        super().__init__()
        self.register_network("value_network", value_network, create_target=delay_value)
        if gamma is not None:
            self._value_kwargs["gamma"] = gamma

    def _value_estimator_network(self):
        return self.value_network

    @property
    def in_keys(self):
        return [*self.value_network.in_keys, self.tensor_keys.value_target]

    def forward(self, td):
        value = self.value_network(td.copy()).get(self.tensor_keys.value)
        target = self._get(td, "value_target")
        return TensorDict(loss_value=(value - target).pow(2).mean())


def _value_net():
    return TensorDictModule(
        nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1)),
        in_keys=["observation"],
        out_keys=["state_value"],
    )


# -- keys -----------------------------------------------------------------------------
def test_set_keys_renames_and_returns_loss():
    loss = _ValueLoss(_value_net())
    assert loss.set_keys(value_target="vt") is loss
    assert loss.tensor_keys.value_target == "vt"
    td = TensorDict(observation=torch.randn(4, 3), vt=torch.zeros(4, 1), batch_size=[4])
    assert loss(td)["loss_value"].shape == ()


def test_set_keys_unknown_name_lists_valid_ones():
    loss = _ValueLoss(_value_net())
    with pytest.raises(ValueError, match="unknown key name 'valu'.*'value_target'"):
        loss.set_keys(valu="x")
    with pytest.raises(TypeError, match="str or a tuple"):
        loss.set_keys(value=3)


def test_set_keys_suggests_the_closest_name_and_changes_nothing_on_a_bad_call():
    loss = _ValueLoss(_value_net())
    with pytest.raises(ValueError, match=r"'valu' .*\. Did you mean 'value'\?"):
        loss.set_keys(value_target="vt", valu="x")
    assert loss.tensor_keys.value_target == "value_target"  # the good name was not set
    estimator = GAE(gamma=0.9, lmbda=0.9, value_network=None)
    with pytest.raises(TypeError, match="reward must be a str"):
        estimator.set_keys(advantage="adv", reward=1)
    assert estimator.tensor_keys.advantage == "advantage"


def test_set_keys_accepts_nested_keys():
    loss = _ValueLoss(_value_net()).set_keys(value_target=("targets", "v"))
    td = TensorDict(observation=torch.randn(4, 3), targets={"v": torch.zeros(4, 1)}, batch_size=[4])
    assert loss(td)["loss_value"].shape == ()


def test_missing_key_error_names_key_loss_and_set_keys():
    loss = _ValueLoss(_value_net())
    td = TensorDict(observation=torch.randn(4, 3), value_targets=torch.zeros(4, 1), batch_size=[4])
    with pytest.raises(KeyError) as info:
        loss(td)
    msg = str(info.value)
    assert "'value_target'" in msg and "_ValueLoss" in msg
    assert "set_keys(value_target=" in msg and "Did you mean 'value_targets'" in msg


def test_missing_network_input_names_key_and_loss():
    loss = _ValueLoss(_value_net())
    td = TensorDict(obs=torch.randn(4, 3), value_target=torch.zeros(4, 1), batch_size=[4])
    with pytest.raises(KeyError, match="_ValueLoss: Key 'observation' not found"):
        loss(td)


# -- target networks ------------------------------------------------------------------
def test_target_network_is_not_trained_but_saved_and_moved():
    loss = _ValueLoss(_value_net())
    names = [n for n, _ in loss.named_parameters()]
    assert names and all(n.startswith("value_network.") for n in names)
    assert not any(p.requires_grad for p in loss.target_value_network.parameters())
    assert len(list(loss.target_value_network.parameters())) == 0
    state = loss.state_dict()
    assert any(k.startswith("target_value_network.") for k in state)
    for (name, p), (tname, t) in zip(
        loss.value_network.named_parameters(), loss.target_value_network.named_buffers()
    ):
        assert name == tname and torch.equal(p, t) and p.data_ptr() != t.data_ptr()
    loss.double()
    assert all(b.dtype == torch.float64 for b in loss.target_value_network.buffers())


def test_no_target_without_delay():
    loss = _ValueLoss(_value_net(), delay_value=False)
    assert not hasattr(loss, "target_value_network")
    with pytest.raises(ValueError, match="no target network"):
        SoftUpdate(loss, tau=0.1)


def test_parameters_shared_trunk_listed_once():
    trunk = SafeModule(nn.Linear(3, 8), in_keys=["observation"], out_keys=["hidden"])
    head = TensorDictModule(
        nn.Sequential(nn.Linear(8, 2), NormalParamExtractor()),
        in_keys=["hidden"],
        out_keys=["loc", "scale"],
    )
    policy = ProbabilisticActor(
        head, in_keys=["loc", "scale"], distribution_class=torch.distributions.Normal
    )
    av = ActorValueOperator(trunk, policy, nn.Linear(8, 1))
    loss = ClipPPOLoss(av.get_policy_operator(), av.get_value_operator())
    params = list(loss.parameters())
    assert len(params) == len({id(p) for p in params}) == len(list(av.parameters())) == 6


def _perturb(loss):
    with torch.no_grad():
        for p in loss.parameters():
            p.add_(torch.randn_like(p))


def test_soft_update_is_polyak_average():
    loss = _ValueLoss(_value_net())
    _perturb(loss)
    before = [b.clone() for b in loss.target_value_network.buffers()]
    online = [p.detach().clone() for p in loss.value_network.parameters()]
    SoftUpdate(loss, tau=0.1).step()
    for b, old, new in zip(loss.target_value_network.buffers(), before, online):
        torch.testing.assert_close(b, 0.9 * old + 0.1 * new)


def test_soft_update_eps_is_one_minus_tau():
    a, b = _ValueLoss(_value_net()), _ValueLoss(_value_net())
    b.load_state_dict(a.state_dict())
    _perturb(a)
    b.value_network.load_state_dict(a.value_network.state_dict())
    SoftUpdate(a, eps=0.75).step()
    SoftUpdate(b, tau=0.25).step()
    for x, y in zip(a.target_value_network.buffers(), b.target_value_network.buffers()):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("kwargs", [{}, {"eps": 0.5, "tau": 0.5}, {"tau": 0.0}, {"eps": 1.0}])
def test_soft_update_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        SoftUpdate(_ValueLoss(_value_net()), **kwargs)


def test_soft_update_follows_the_loss_after_to():
    loss = _ValueLoss(_value_net())
    updater = SoftUpdate(loss, tau=1.0)
    updater.step()
    loss.double()  # replaces the buffers: the updater must notice
    _perturb(loss)
    updater.step()
    for p, b in zip(loss.value_network.parameters(), loss.target_value_network.buffers()):
        assert b.dtype == torch.float64
        torch.testing.assert_close(b, p.detach())


def test_hard_update_copies_every_interval():
    loss = _ValueLoss(_value_net())
    _perturb(loss)
    updater = HardUpdate(loss, value_network_update_interval=3)
    target = lambda: [b.clone() for b in loss.target_value_network.buffers()]  # noqa: E731
    start = target()
    updater.step()
    updater.step()
    for b, s in zip(target(), start):
        assert torch.equal(b, s)
    updater.step()
    for b, p in zip(target(), loss.value_network.parameters()):
        assert torch.equal(b, p.detach())
    with pytest.raises(ValueError, match=">= 1"):
        HardUpdate(loss, value_network_update_interval=0)


def test_init_copies_online_values():
    loss = _ValueLoss(_value_net())
    _perturb(loss)
    SoftUpdate(loss, tau=0.01).init_()
    for b, p in zip(loss.target_value_network.buffers(), loss.value_network.parameters()):
        assert torch.equal(b, p.detach())


def test_updaters_on_dqn_seed_form():
    value_network, _ = qvalue_actor()
    loss_module = DQNLoss(value_network=value_network, gamma=0.99)
    HardUpdate(loss_module, value_network_update_interval=1).step()
    SoftUpdate(loss_module, eps=0.995).step()


# -- value estimators -----------------------------------------------------------------
def test_default_value_estimator_built_lazily_with_constructor_gamma():
    loss = _ValueLoss(_value_net(), gamma=0.5)
    est = loss.value_estimator
    assert isinstance(est, TD0Estimator) and est.gamma == 0.5
    assert est.value_network is loss.value_network
    assert est not in list(loss.modules())  # not a submodule: no duplicate parameters


def test_make_value_estimator_switches_type_and_hyperparams():
    loss = _ValueLoss(_value_net(), gamma=0.5)
    assert loss.make_value_estimator(ValueEstimators.TDLambda, lmbda=0.3) is loss
    est = loss.value_estimator
    assert isinstance(est, TDLambdaEstimator) and est.gamma == 0.5 and est.lmbda == 0.3
    loss.make_value_estimator(ValueEstimators.GAE, gamma=0.9, average_gae=True)
    assert isinstance(loss.value_estimator, GAE) and loss.value_estimator.average_gae
    with pytest.raises(TypeError, match="ValueEstimators member"):
        loss.make_value_estimator("GAE")
    with pytest.raises(ValueError, match="gamma"):
        loss.make_value_estimator(ValueEstimators.TD0, gamma=1.5)


def test_estimator_keys_follow_set_keys():
    loss = _ValueLoss(_value_net())
    loss.make_value_estimator(ValueEstimators.TD0)
    loss.set_keys(reward="r", value_target="vt")
    assert loss.value_estimator.tensor_keys.reward == "r"
    assert loss.value_estimator.tensor_keys.value_target == "vt"
    loss2 = _ValueLoss(_value_net()).set_keys(done="d")
    assert loss2.value_estimator.tensor_keys.done == "d"


def test_bad_reward_shape_reaches_user_with_loss_name():
    actor, _ = gaussian_actor()
    value, _ = critic()
    loss = ClipPPOLoss(actor, value)
    td = transitions((5,))
    with torch.no_grad():
        actor(td)
    td["next", "reward"] = td["next", "reward"].squeeze(-1)  # [5]: no singleton dim
    with pytest.raises(ValueError, match=r"ClipPPOLoss: .*GAE.*shape \[5\].*expected \[5, 1\]"):
        loss(td)


# -- ensembles and detached calls -----------------------------------------------------
@pytest.mark.parametrize("vectorized", [None, True, False])
def test_ensemble_copies_differ_and_train(vectorized):
    q = TensorDictModule(nn.Linear(4, 1), ["obs"], ["q"])
    ens = Ensemble(q, 3, vectorized=vectorized)
    w = ens.params["module", "weight"]
    assert w.shape == (3, 1, 4) and torch.equal(w[0], q.module.weight)
    assert not torch.equal(w[1], w[2])
    td = TensorDict(obs=torch.randn(5, 4), batch_size=[5])
    out = ens(td)
    assert out["q"].shape == (3, 5, 1) and "q" not in td.keys()
    expected = torch.stack([td["obs"] @ w[i].T + ens.params["module", "bias"][i] for i in range(3)])
    torch.testing.assert_close(out["q"], expected)
    out["q"].sum().backward()
    assert ens.params["module", "weight"].grad.shape == (3, 1, 4)
    per_copy = TensorDict(obs=torch.randn(3, 5, 4), batch_size=[3, 5])
    assert ens(per_copy, shared_input=False)["q"].shape == (3, 5, 1)


def _q_modules():
    relu = MLP(in_features=7, out_features=1, num_cells=[16, 16], activation_class=nn.ReLU)
    tanh = MLP(in_features=7, out_features=(2, 3), num_cells=[8], activation_class=nn.Tanh)
    return {
        "relu mlp, two inputs": TensorDictModule(relu, ["obs", "action"], ["q"]),
        "tanh mlp, reshaped out": ValueOperator(tanh, in_keys=["obs", "action"], out_keys=["q"]),
        "linear": TensorDictModule(nn.Linear(4, 2), ["obs"], ["q"]),
    }


@pytest.mark.parametrize("name", list(_q_modules()))
def test_fused_ensemble_matches_the_per_copy_loop(name):
    """Affine stacks run as batched products; values and gradients equal the loop's."""
    torch.manual_seed(0)
    module = _q_modules()[name]
    fused = Ensemble(module, 3)
    loop = Ensemble(module, 3, vectorized=False)
    loop.params = fused.params  # the same parameters
    assert fused._plan is not None and loop.vectorized is False

    def inputs(*batch):
        obs = torch.randn(*batch, 4, requires_grad=True)
        return TensorDict(obs=obs, action=torch.randn(*batch, 3), batch_size=batch)

    shared, per_copy = inputs(4, 5), inputs(3, 5)
    cases = [
        (shared, {}),
        (per_copy, {"shared_input": False}),
        (shared, {"params": fused.params[torch.tensor([2, 0])]}),  # a subset, as REDQ's
        (shared, {"params": fused.params.detach()}),  # as LossModule._call_detached
    ]
    for td, kwargs in cases:
        got, want = fused(td, **kwargs), loop(td, **kwargs)
        assert got.batch_size == want.batch_size and set(got.keys()) == set(want.keys())
        torch.testing.assert_close(got["q"], want["q"])
        grads = [td["obs"], *fused.params.values(True, True)]
        g_got = torch.autograd.grad(
            got["q"].square().sum(), grads, allow_unused=True, retain_graph=True
        )
        g_want = torch.autograd.grad(want["q"].square().sum(), grads, allow_unused=True)
        for a, b in zip(g_got, g_want):
            assert (a is None) == (b is None)
            if a is not None:
                torch.testing.assert_close(a, b)
    assert not shared["obs"].isnan().any()  # in-place activations never touch the input


def test_ensemble_runs_per_copy_where_it_cannot_fuse():
    norm = MLP(in_features=4, out_features=1, num_cells=[8], norm_class=nn.LayerNorm)
    drop = MLP(in_features=4, out_features=1, num_cells=[8], dropout=0.5)
    modules = [
        TensorDictModule(norm, ["obs"], ["q"]),
        TensorDictModule(drop, ["obs"], ["q"]),
        TensorDictModule(nn.Sequential(nn.Linear(4, 8), nn.ReLU()), ["obs"], ["q"]),
    ]
    td = TensorDict(obs=torch.randn(5, 4), batch_size=[5])
    for module in modules:
        ens = Ensemble(module, 2)
        assert ens._plan is None
        assert ens(td)["q"].shape[:2] == (2, 5)


def test_fused_ensemble_names_a_missing_input_like_the_module():
    q = ValueOperator(MLP(in_features=7, out_features=1, num_cells=[8]), in_keys=["obs", "action"])
    td = TensorDict(obs=torch.randn(5, 4), batch_size=[5])
    with pytest.raises(KeyError, match="action") as fused_err:
        Ensemble(q, 2)(td)
    with pytest.raises(KeyError, match="action") as loop_err:
        Ensemble(q, 2, vectorized=False)(td)
    assert str(fused_err.value) == str(loop_err.value)


def test_ensemble_target_and_soft_update():
    loss = LossModule()
    q = TensorDictModule(nn.Linear(4, 1), ["obs"], ["q"])
    loss.register_network("qvalue_network", q, create_target=True, num_copies=2)
    assert [n for n, _ in loss.named_parameters()] == [
        "qvalue_network.params.module.weight",
        "qvalue_network.params.module.bias",
    ]
    _perturb(loss)
    SoftUpdate(loss, tau=1.0).step()
    torch.testing.assert_close(
        loss.target_qvalue_network.params["module", "weight"],
        loss.qvalue_network.params["module", "weight"].detach(),
    )
    td = TensorDict(obs=torch.randn(5, 4), batch_size=[5])
    assert loss.target_qvalue_network(td)["q"].shape == (2, 5, 1)


@pytest.mark.parametrize("copies", [None, 2])
def test_call_detached_blocks_parameter_gradients_only(copies):
    loss = LossModule()
    loss.register_network("net", _value_net(), num_copies=copies)
    obs = torch.randn(4, 3, requires_grad=True)
    out = loss._call_detached("net", TensorDict(observation=obs, batch_size=[4]))
    out["state_value"].sum().backward()
    assert obs.grad is not None and obs.grad.abs().sum() > 0
    assert all(p.grad is None for p in loss.parameters())


@pytest.mark.parametrize("gamma", [0.0, 1.5, -0.1])
def test_bad_gamma_fails_at_construction(gamma):
    actor, _ = gaussian_actor()
    value, _ = critic()
    with pytest.raises(ValueError, match=r"ClipPPOLoss: gamma must lie in \(0, 1\]"):
        ClipPPOLoss(actor, value, gamma=gamma)
    with pytest.raises(ValueError, match=r"DQNLoss: gamma must lie in \(0, 1\]"):
        DQNLoss(qvalue_actor()[0], gamma=gamma)


def test_bad_lmbda_rejected():
    actor, _ = gaussian_actor()
    value, _ = critic()
    loss = ClipPPOLoss(actor, value)
    with pytest.raises(ValueError, match=r"lmbda must lie in \[0, 1\]"):
        loss.make_value_estimator(ValueEstimators.GAE, lmbda=1.2)


@pytest.mark.gpu
def test_losses_and_updates_on_cuda():
    """Everything moves with ``loss.to("cuda")``; the ensemble uses vmap there."""
    loss = _ValueLoss(_value_net()).to("cuda")
    updater = SoftUpdate(loss, tau=0.5)
    td = TensorDict(
        observation=torch.randn(4, 3), value_target=torch.zeros(4, 1), batch_size=[4]
    ).to("cuda")
    loss(td)["loss_value"].backward()
    updater.step()
    assert all(b.is_cuda for b in loss.target_value_network.buffers())
    ens = Ensemble(TensorDictModule(nn.Linear(4, 1), ["obs"], ["q"]), 2).to("cuda")
    out = ens(TensorDict(obs=torch.randn(5, 4, device="cuda"), batch_size=[5]))
    assert out["q"].shape == (2, 5, 1) and out["q"].is_cuda
    value_network, _ = qvalue_actor()
    dqn = DQNLoss(value_network, gamma=0.99).to("cuda")
    batch = transitions((6,), obs=4)
    batch["action"] = torch.eye(3, dtype=torch.long)[torch.randint(3, (6,))]
    assert dqn(batch.to("cuda"))["loss"].is_cuda


def test_hard_update_counter_round_trips_through_state_dict():
    from torch import nn

    from torchrl_lite.objectives import HardUpdate, LossModule

    class Tiny(LossModule):
        def __init__(self):
            super().__init__()
            self.register_network("value_network", nn.Linear(2, 1), create_target=True)

    upd = HardUpdate(Tiny(), value_network_update_interval=3)
    upd.step()
    upd.step()
    other = HardUpdate(Tiny(), value_network_update_interval=3)
    other.load_state_dict(upd.state_dict())
    assert other.counter == 2
