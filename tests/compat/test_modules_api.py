"""Seed-era TorchRL module code, import changed: ``NormalParamWrapper``,
``modules.models.utils.SquashDims``, ``DdpgMlpActor`` / ``DdpgMlpQNet``,
``ConvNet.default_atari_dqn``, ``EGreedyModule`` (unbatched categorical env, ``device=``)
and ``LSTMModule(python_based=)``.

References: tensordict's ``NormalParamExtractor``, ``torch.flatten``, the networks as the
papers describe them built by hand, a greedy arg-max computed apart, the canonical module.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule, TensorDictSequential
from torch import nn

from torchrl_lite.data import Categorical
from torchrl_lite.envs import GymEnv, PendulumEnv
from torchrl_lite.modules import (
    ConvNet,
    DdpgMlpActor,
    DdpgMlpQNet,
    EGreedyModule,
    ExplorationType,
    GRUModule,
    LSTMModule,
    NormalParamsWrapper,
    NormalParamWrapper,
    ProbabilisticActor,
    QValueActor,
    TanhDelta,
    ValueOperator,
    set_exploration_type,
    set_recurrent_mode,
)
from torchrl_lite.modules.models.utils import SquashDims
from torchrl_lite.objectives import DDPGLoss


# -- NormalParamWrapper, SquashDims ---------------------------------------------------
def test_normal_param_wrapper_is_the_canonical_wrapper():
    assert NormalParamWrapper is NormalParamsWrapper
    torch.manual_seed(0)
    linear = nn.Linear(3, 4)
    x = torch.randn(5, 3)
    loc, scale = NormalParamWrapper(linear)(x)  # the v0.4 docs' usage
    ref_loc, ref_scale = NormalParamExtractor()(linear(x))
    torch.testing.assert_close(loc, ref_loc)
    torch.testing.assert_close(scale, ref_scale)


def test_squash_dims_from_models_utils():
    x = torch.randn(2, 7, 3, 4, 5)
    torch.testing.assert_close(SquashDims()(x), x.flatten(-3))
    torch.testing.assert_close(SquashDims(ndims_in=2)(x), x.flatten(-2))


# -- DdpgMlpActor / DdpgMlpQNet -------------------------------------------------------
def _linears(module):
    return [m for m in module.modules() if isinstance(m, nn.Linear)]


def test_ddpg_networks_match_the_paper_and_train_with_ddpg_loss():
    env = PendulumEnv(seed=0)
    spec = env.action_spec
    actor = ProbabilisticActor(
        TensorDictModule(DdpgMlpActor(action_dim=1), ["observation"], ["param"]),
        in_keys=["param"],
        spec=spec,
        distribution_class=TanhDelta,
        distribution_kwargs={"low": spec.space.low, "high": spec.space.high},
    )
    qnet = ValueOperator(DdpgMlpQNet(), in_keys=["observation", "action"])
    with torch.no_grad():  # lazy layers: materialized before building the loss
        qnet(actor(env.reset()))
    assert [(m.in_features, m.out_features) for m in _linears(actor)] == [
        (3, 400),
        (400, 300),
        (300, 1),
    ]
    assert [(m.in_features, m.out_features) for m in _linears(qnet)] == [
        (3, 400),
        (401, 300),
        (300, 1),
    ]
    assert all(isinstance(m, nn.ELU) for m in (actor.module[0].module.mlp[1], qnet.module.mlp1[1]))
    for last in (_linears(actor)[-1], _linears(qnet)[-1]):  # paper: last layers in ±3e-3
        assert float(last.weight.detach().abs().max()) <= 3e-3
        assert float(last.bias.detach().abs().max()) <= 3e-3
    loss = DDPGLoss(actor, qnet)
    with torch.no_grad():
        batch = env.rollout(8, actor)
    out = loss(batch)
    (out["loss_actor"] + out["loss_value"]).backward()
    assert all(p.grad is not None for p in loss.actor_network_params.values(True, True))
    assert all(p.grad is not None for p in loss.value_network_params.values(True, True))


# -- ConvNet.default_atari_dqn --------------------------------------------------------
def test_default_atari_dqn_is_the_nature_network():
    n_actions = 6
    net = ConvNet.default_atari_dqn(n_actions)
    x = torch.rand(2, 4, 84, 84)
    assert net(x).shape == (2, n_actions)
    nature = nn.Sequential(  # Mnih et al. 2015, Methods: "Model architecture"
        nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
        nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
        nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(3136, 512), nn.ReLU(), nn.Linear(512, n_actions),
    )  # fmt: skip
    shapes = [p.shape for p in net.parameters()]
    assert shapes == [p.shape for p in nature.parameters()]
    assert sum(p.numel() for p in net.parameters()) == sum(p.numel() for p in nature.parameters())
    assert sum(isinstance(m, nn.ReLU) for m in net.modules()) == 4
    with torch.no_grad():  # same weights, same outputs
        for src, dst in zip(net.parameters(), nature.parameters()):
            dst.copy_(src)
        torch.testing.assert_close(net(x), nature(x))


# -- EGreedyModule ----------------------------------------------------------------------
def _cartpole_policy(eps):
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)  # unbatched, Categorical
    torch.manual_seed(0)
    qactor = QValueActor(nn.Linear(4, 2), in_keys=["observation"], spec=env.action_spec)
    explore = EGreedyModule(env.action_spec, eps_init=eps, eps_end=eps, annealing_num_steps=10)
    return env, qactor, TensorDictSequential(qactor, explore)


def test_egreedy_unbatched_categorical_env_rollout_repro():
    """Used to crash in ``exploration.py`` (``reshape()`` of an empty shape)."""
    env, qactor, policy = _cartpole_policy(eps=0.0)
    try:
        env.set_seed(0)
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            rollout = env.rollout(10, policy)
        assert rollout["action"].shape == (rollout.shape[0],)  # index actions, no batch dim
        greedy = qactor.module[0](rollout["observation"]).argmax(-1)  # eps=0: the arg-max
        assert torch.equal(rollout["action"], greedy)
        _, _, random_policy = _cartpole_policy(eps=1.0)
        td = env.reset()
        seen = set()
        with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
            for _ in range(40):
                seen.add(int(random_policy(td.clone())["action"]))
        assert seen == {0, 1}
    finally:
        env.close()


def test_egreedy_device_keyword():
    spec = GymEnv("CartPole-v1", categorical_action_encoding=True)
    try:
        on_cpu = EGreedyModule(spec.action_spec, eps_init=0.5, device="cpu")
        plain = EGreedyModule(spec.action_spec, eps_init=0.5)
        assert torch.equal(on_cpu.eps, plain.eps) and on_cpu.spec == plain.spec
        meta = EGreedyModule(spec.action_spec, device="meta")  # moves buffers and spec
        assert meta.eps.device.type == "meta" and meta.spec.device.type == "meta"
    finally:
        spec.close()


# -- LSTMModule(python_based=) ----------------------------------------------------------
@pytest.mark.parametrize("cls", [LSTMModule, GRUModule])
def test_python_based_gives_the_fused_kernels_outputs_and_gradients(cls):
    torch.manual_seed(0)
    kwargs = dict(input_size=3, hidden_size=5, num_layers=2, in_key="obs", out_key="features")
    ref = cls(**kwargs)
    got = cls(**kwargs, python_based=True)
    got.load_state_dict(ref.state_dict())
    assert got.python_based and not ref.python_based
    step = TensorDict(
        obs=torch.randn(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4]
    )
    torch.testing.assert_close(got(step.clone())["features"], ref(step.clone())["features"])
    is_init = torch.zeros(4, 6, 1, dtype=torch.bool)
    is_init[:, 0] = is_init[1, 3] = is_init[2, 2] = True  # resets inside rows: packed segments
    seq = TensorDict(obs=torch.randn(4, 6, 3), is_init=is_init, batch_size=[4, 6])
    with set_recurrent_mode(True):
        want, have = ref(seq.clone()), got(seq.clone())
    for key in want.keys(True, True):
        torch.testing.assert_close(have[key], want[key])
    want["features"].pow(2).sum().backward()
    have["features"].pow(2).sum().backward()
    for p, q in zip(got.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


@pytest.mark.gpu
def test_egreedy_device_cuda():
    explore = EGreedyModule(Categorical(3), eps_init=1.0, device="cuda")
    assert explore.eps.is_cuda and explore.spec.device.type == "cuda"
    td = TensorDict(action=torch.tensor(0, device="cuda"))
    with set_exploration_type(ExplorationType.RANDOM):
        assert explore(td)["action"].is_cuda


def test_python_based_lstm_runs_under_vmap():
    """What TorchRL's switch is for (torch 2.x has no vmap batching rule for ``nn.LSTM``)."""
    torch.manual_seed(0)
    kwargs = dict(input_size=3, hidden_size=5, in_key="obs", out_key="features")
    module = LSTMModule(**kwargs, python_based=True)
    ref = LSTMModule(**kwargs)
    ref.load_state_dict(module.state_dict())
    obs, is_init = torch.randn(7, 4, 3), torch.ones(7, 4, 1, dtype=torch.bool)

    def call(net):
        return lambda o, i: net(TensorDict(obs=o, is_init=i, batch_size=[4]))["features"]

    out = torch.vmap(call(module))(obs, is_init)  # [7, 4, 5]
    whole = ref(TensorDict(obs=obs, is_init=is_init, batch_size=[7, 4]))["features"]
    torch.testing.assert_close(out, whole)
