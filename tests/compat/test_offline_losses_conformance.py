"""TorchRL's offline-loss call shapes (IQL family), checked against the paper's formulas.

The reference runs each Q-network copy as the original module with the copy's
parameters (``params.to_module(module)``), then applies the IQL formulas by hand.
"""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from torchrl_lite.modules import MLP, Categorical, ProbabilisticActor
from torchrl_lite.objectives import DiscreteIQLLoss, HardUpdate

N_OBS, N_ACT, B = 3, 4, 16


def _nets():
    torch.manual_seed(0)
    actor = ProbabilisticActor(
        TensorDictModule(MLP(N_OBS, N_ACT, depth=1), ["observation"], ["logits"]),
        in_keys=["logits"],
        distribution_class=Categorical,
    )
    qvalue = TensorDictModule(MLP(N_OBS, N_ACT, depth=1), ["observation"], ["state_action_value"])
    value = TensorDictModule(MLP(N_OBS, 1, depth=1), ["observation"], ["state_value"])
    return actor, qvalue, value


def _batch(one_hot=False):
    g = torch.Generator().manual_seed(1)
    action = torch.randint(N_ACT, (B,), generator=g)
    terminated = torch.rand(B, 1, generator=g) < 0.3
    return TensorDict(
        observation=torch.randn(B, N_OBS, generator=g),
        action=torch.nn.functional.one_hot(action, N_ACT) if one_hot else action,
        next=TensorDict(
            observation=torch.randn(B, N_OBS, generator=g),
            reward=torch.randn(B, 1, generator=g),
            done=terminated.clone(),
            terminated=terminated,
            batch_size=[B],
        ),
        batch_size=[B],
    )


def _reference(loss, qvalue, value, actor, batch, gamma, expectile, temperature):
    """The IQL losses by hand (Kostrikov et al. 2021, eqs. 5-7) for index actions."""
    a = batch["action"].reshape(B, 1)

    def q_of(params):  # [N, B]: each copy's Q(s, a)
        out = []
        for i in range(params.shape[0]):
            with params[i].to_module(qvalue):
                out.append(qvalue(batch.clone())["state_action_value"].gather(-1, a).squeeze(-1))
        return torch.stack(out)

    with torch.no_grad():
        q_target = q_of(loss.target_qvalue_network_params).min(0).values
        v = value(batch.clone())["state_value"].squeeze(-1)
        v_next = value(batch["next"].clone())["state_value"].squeeze(-1)
        u = q_target - v
        loss_value = ((expectile - (u < 0).float()).abs() * u**2).mean()
        logits = actor.get_dist(batch.clone()).logits
        log_pi = torch.log_softmax(logits, -1).gather(-1, a).squeeze(-1)
        loss_actor = -(torch.exp(temperature * u).clamp(max=100) * log_pi).mean()
        not_term = (~batch["next", "terminated"]).float().squeeze(-1)
        y = batch["next", "reward"].squeeze(-1) + gamma * not_term * v_next
        q = q_of(loss.qvalue_network_params)
        loss_q = ((q - y) ** 2).mean(-1).sum()
    return loss_value, loss_actor, loss_q


@pytest.mark.parametrize("one_hot", [False, True])
def test_discrete_iql_losses_match_the_paper(one_hot):
    actor, qvalue, value = _nets()
    loss = DiscreteIQLLoss(
        actor,
        qvalue,
        value_network=value,
        loss_function="l2",
        temperature=2.0,
        expectile=0.8,
        action_space="one_hot" if one_hot else "categorical",
    )
    loss.make_value_estimator(gamma=0.9)
    with torch.no_grad():  # the target copies drift from the online ones
        for p in loss.target_qvalue_network_params.values(True, True):
            p.add_(0.05)
    ref = _reference(loss, qvalue, value, actor, _batch(), 0.9, 0.8, 2.0)
    batch = _batch(one_hot)
    value_loss, _ = loss.value_loss(batch)
    actor_loss, meta = loss.actor_loss(batch)
    q_loss, q_meta = loss.qvalue_loss(batch)
    torch.testing.assert_close(value_loss, ref[0])
    torch.testing.assert_close(actor_loss, ref[1])
    torch.testing.assert_close(q_loss, ref[2])
    assert set(meta) == {"advantage"} and set(q_meta) == {"td_error"}
    assert batch[loss.tensor_keys.priority].shape == (B,)  # per-sample TD error for a PRB
    out = loss(batch)
    torch.testing.assert_close(out["loss_qvalue"], ref[2])
    # each loss reaches its own network only
    actor_loss.backward()
    assert all(p.grad is None for p in value.parameters())


def test_discrete_iql_hard_update_and_grouped_parameters():
    actor, qvalue, value = _nets()
    loss = DiscreteIQLLoss(actor, qvalue, value, action_space="categorical")
    updater = HardUpdate(loss, value_network_update_interval=2)
    with torch.no_grad():
        for p in loss.qvalue_network_params.values(True, True):
            p.add_(1.0)
    target = loss.target_qvalue_network_params.clone()
    updater.step()
    assert (loss.target_qvalue_network_params == target).all()  # not yet
    updater.step()
    assert (loss.target_qvalue_network_params == loss.qvalue_network_params).all()
    names = {"actor_network_params", "qvalue_network_params", "value_network_params"}
    assert all(len(list(getattr(loss, n).flatten_keys().values())) > 0 for n in names)


def test_discrete_iql_rejects_bad_action_space_and_shapes():
    actor, qvalue, value = _nets()
    with pytest.raises(ValueError, match="action_space must be 'categorical'.*got 'box'"):
        DiscreteIQLLoss(actor, qvalue, value, action_space="box")
    loss = DiscreteIQLLoss(actor, qvalue, value, action_space="categorical")
    with pytest.raises(ValueError, match="Pass action_space='one_hot'"):
        loss.qvalue_loss(_batch(one_hot=True))


def test_td3bc_split_losses_are_the_scripts_update_steps():
    from torchrl_lite.data import Bounded
    from torchrl_lite.modules import Actor, AdditiveGaussianModule, ValueOperator

    torch.manual_seed(0)
    spec = Bounded(-1.0, 1.0, shape=(2,))
    actor = Actor(MLP(3, 2, depth=1), spec=spec)
    qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["action", "observation"])
    from torchrl_lite.objectives import TD3BCLoss

    loss = TD3BCLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2", action_spec=spec,
                     policy_noise=0.2, noise_clip=0.5, alpha=2.5)  # fmt: skip
    loss.make_value_estimator(gamma=0.9)
    g = torch.Generator().manual_seed(2)
    batch = TensorDict(
        observation=torch.randn(B, 3, generator=g),
        action=torch.rand(B, 2, generator=g) * 2 - 1,
        next=TensorDict(observation=torch.randn(B, 3, generator=g),
                        reward=torch.randn(B, 1, generator=g),
                        done=torch.zeros(B, 1, dtype=torch.bool),
                        terminated=torch.zeros(B, 1, dtype=torch.bool), batch_size=[B]),
        batch_size=[B],
    )  # fmt: skip
    actor_loss, meta = loss.actor_loss(batch.clone())
    with torch.no_grad():  # Fujimoto & Gu 2021, eq. 3, with Q_1's own parameters
        mu = actor(batch.clone())["action"]
        with loss.qvalue_network_params[0].to_module(qvalue):
            q1 = qvalue(batch.clone().set("action", mu))["state_action_value"].squeeze(-1)
        lmbda = 2.5 / q1.abs().mean()
        expected = -lmbda * q1.mean() + ((mu - batch["action"]) ** 2).mean()
    torch.testing.assert_close(actor_loss, expected)
    assert set(meta) == {"bc_loss", "lmbda"}
    torch.manual_seed(5)
    q_loss, q_meta = loss.qvalue_loss(batch.clone())
    torch.manual_seed(5)
    torch.testing.assert_close(q_loss, loss(batch.clone())["loss_qvalue"])
    assert {"td_error", "pred_value", "target_value"} == set(q_meta)
    noise = AdditiveGaussianModule(spec=spec, sigma_init=1, sigma_end=1, mean=0, std=0.1,
                                   device="cpu")  # fmt: skip
    assert noise.sigma.device == torch.device("cpu")


def test_tanh_normal_reads_an_empty_bound_as_the_default_and_says_so():
    # TorchRL's v0.4 CQL scripts pass action_spec.space.low[len(batch_size):] of a batch [1]
    from torchrl_lite.modules import TanhNormal

    loc, scale = torch.randn(5, 3), torch.rand(5, 3) + 0.1
    with pytest.warns(
        UserWarning, match=r"low has no entries \(shape \[0, 3\]\); using the default low=-1"
    ):
        dist = TanhNormal(loc, scale, min=torch.empty(0, 3), max=torch.empty(0, 3))
    reference = TanhNormal(loc, scale)
    x = torch.rand(5, 3) * 1.8 - 0.9
    torch.testing.assert_close(dist.log_prob(x), reference.log_prob(x))


def test_cql_with_a_batched_action_spec_equals_the_unbatched_one():
    # TorchRL's v0.4 CQL scripts give the actor the spec of a batch-[1] env: [1, A]
    from tensordict.nn import NormalParamExtractor

    from torchrl_lite.data import Bounded
    from torchrl_lite.modules import TanhNormal, ValueOperator
    from torchrl_lite.objectives import CQLLoss

    def build(shape):
        torch.manual_seed(0)
        net = torch.nn.Sequential(MLP(3, 4, depth=1), NormalParamExtractor())
        actor = ProbabilisticActor(TensorDictModule(net, ["observation"], ["loc", "scale"]),
                                   in_keys=["loc", "scale"], distribution_class=TanhNormal,
                                   spec=Bounded(-1.0, 1.0, shape=shape))  # fmt: skip
        qvalue = ValueOperator(MLP(5, 1, depth=1), in_keys=["observation", "action"])
        return CQLLoss(actor, qvalue, num_random=4, gamma=0.9)

    batch = TensorDict(
        observation=torch.randn(B, 3), action=torch.rand(B, 2) * 2 - 1,
        next=TensorDict(observation=torch.randn(B, 3), reward=torch.randn(B, 1),
                        done=torch.zeros(B, 1, dtype=torch.bool),
                        terminated=torch.zeros(B, 1, dtype=torch.bool), batch_size=[B]),
        batch_size=[B],
    )  # fmt: skip
    outs = []
    for shape in ((2,), (1, 2)):
        loss = build(shape)
        torch.manual_seed(3)
        outs.append(loss(batch.clone()))
    torch.testing.assert_close(outs[1]["loss_cql"], outs[0]["loss_cql"])
    torch.testing.assert_close(outs[1]["loss_qvalue"], outs[0]["loss_qvalue"])
