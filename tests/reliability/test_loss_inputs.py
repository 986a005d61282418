"""Losses check their inputs on the first batch (then cheaply skip it), naming the culprit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchrl_lite.objectives._input_checks as checks
from tests.objectives.loss_nets import critic, gaussian_actor, qvalue_actor, transitions
from tests.objectives.offpolicy_utils import make_actor, make_batch, make_qvalue, make_value
from torchrl_lite.data import Bounded
from torchrl_lite.modules import MLP, Actor
from torchrl_lite.objectives import (
    A2CLoss,
    ClipPPOLoss,
    CQLLoss,
    DDPGLoss,
    DQNLoss,
    IQLLoss,
    SACLoss,
    TD3Loss,
)


def dqn_batch(action):
    batch = transitions((5,), obs=4)
    batch["action"] = action
    return batch


@pytest.mark.parametrize(
    "space, action, match",
    [
        ("categorical", torch.tensor([0, 1, 3, 0, 1]), r"indices outside \[0, 3\): \[3\]"),
        ("categorical", torch.tensor([0, -1, 2, 0, 1]), r"indices outside \[0, 3\): \[-1\]"),
        ("categorical", torch.tensor([0.0, 1.5, 2, 0, 1]), r"non-integer values"),
        ("one_hot", torch.tensor([[1, 1, 0]] * 5), r"not one-hot: 5 of 5 rows.*\[1, 1, 0\]"),
        ("one_hot", torch.zeros(5, 3, dtype=torch.long), r"not one-hot.*\[0, 0, 0\]"),
        ("one_hot", torch.tensor([[0, 2, 0]] * 5), r"not one-hot"),
    ],
)
def test_dqn_rejects_actions_outside_the_action_space(space, action, match):
    qnet, _ = qvalue_actor(obs=4, n=3, action_space=space)
    loss = DQNLoss(qnet, gamma=0.9)
    with pytest.raises(ValueError, match="DQNLoss: action 'action' .*" + match.split(".*")[0]):
        loss(dqn_batch(action))
    with pytest.raises(ValueError, match=match):  # a failed check is kept for the next batch
        loss(dqn_batch(action))


def test_dqn_checks_the_first_batch_only(monkeypatch):
    calls = []
    original = checks.check_discrete_actions
    monkeypatch.setattr(
        "torchrl_lite.objectives.dqn.check_discrete_actions",
        lambda *a: calls.append(1) or original(*a),
    )
    qnet, _ = qvalue_actor(obs=4, n=3, action_space="categorical")
    loss = DQNLoss(qnet, gamma=0.9)
    for _ in range(3):
        loss(dqn_batch(torch.tensor([0, 1, 2, 0, 1])))
    assert calls == [1]


@pytest.mark.parametrize("loss_class", [ClipPPOLoss, A2CLoss])
def test_actor_critic_loss_without_critic_or_advantage_names_both_fixes(loss_class):
    actor, _ = gaussian_actor()
    loss = loss_class(actor, None)
    batch = transitions((6,))
    batch["action"] = torch.randn(6, 2)
    batch["sample_log_prob"] = torch.zeros(6)
    with pytest.raises(KeyError, match=r"no 'advantage' entry.*GAE\(.*critic_network"):
        loss(batch)
    batch["advantage"] = torch.randn(6, 1)  # the first way: the batch carries it
    if loss_class is A2CLoss:
        batch["value_target"] = torch.randn(6, 1)
    assert torch.isfinite(loss(batch)["loss_objective"])
    with_critic = loss_class(actor, critic()[0])  # the second way: a critic computes it
    del batch["advantage"]
    assert torch.isfinite(with_critic(batch)["loss_objective"])


def deterministic_actor():
    net = nn.Sequential(MLP(3, 2, num_cells=8, depth=1), nn.Tanh())
    return Actor(net, in_keys=["observation"], spec=Bounded(-1.0, 1.0, (2,)))


def continuous_losses():
    yield "SACLoss", lambda: SACLoss(make_actor()[0], make_qvalue())
    yield "CQLLoss", lambda: CQLLoss(make_actor()[0], make_qvalue())
    yield "IQLLoss", lambda: IQLLoss(make_actor()[0], make_qvalue(), make_value())
    yield "TD3Loss", lambda: TD3Loss(deterministic_actor(), make_qvalue())
    yield "DDPGLoss", lambda: DDPGLoss(deterministic_actor(), make_qvalue())


@pytest.mark.parametrize("name, build", list(continuous_losses()))
def test_continuous_loss_rejects_actions_of_another_shape(name, build):
    loss = build()
    batch = make_batch(action=torch.rand(6, 3))  # 3 action dims; the actor's spec has 2
    with pytest.raises(ValueError, match=rf"{name}: action 'action' has shape \[6, 3\].*\[2\]"):
        loss(batch)
    out = loss(make_batch())  # and the right shape goes through
    assert all(torch.isfinite(v).all() for k, v in out.items() if k.startswith("loss"))


def trajectory(with_ids=True):
    """One env's batch [8] in time order: two episodes of 4 steps (obs 0..3, then 100..103)."""
    from tensordict import TensorDict

    obs = torch.tensor([0.0, 1, 2, 3, 100, 101, 102, 103]).unsqueeze(-1)  # [T, 1]
    done = torch.zeros(8, 1, dtype=torch.bool)
    done[3] = True
    td = TensorDict(
        {
            "observation": obs,
            "next": {"observation": obs + 1, "reward": torch.ones(8, 1), "done": done},
        },
        [8],
    )
    if with_ids:
        td["collector", "traj_ids"] = (torch.arange(8) > 3).long()
    return td


@pytest.mark.parametrize("with_ids", [True, False])
def test_estimator_warns_once_on_a_batch_that_is_not_a_trajectory(with_ids):
    import warnings

    from torchrl_lite.objectives.value import GAE

    value = critic(obs=1)[0]
    gae = GAE(gamma=0.9, lmbda=0.9, value_network=value)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        GAE(gamma=0.9, lmbda=0.9, value_network=value)(trajectory(with_ids=with_ids))
    shuffled = trajectory(with_ids=with_ids)[torch.tensor([6, 1, 4, 0, 7, 2, 5, 3])]
    with pytest.warns(UserWarning, match=r"GAE ran over a batch \[8\].*not a trajectory"):
        gae(shuffled)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gae(shuffled)  # checked once: the next batches pay nothing


def test_one_step_estimator_does_not_warn_on_shuffled_transitions():
    import warnings

    from torchrl_lite.objectives.value import TD0Estimator

    shuffled = trajectory()[torch.tensor([6, 1, 4, 0, 7, 2, 5, 3])]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # TD(0) targets are one step: a replay sample is fine
        TD0Estimator(gamma=0.9, value_network=critic(obs=1)[0])(shuffled)
