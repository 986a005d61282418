"""Objective benchmarks: (a) loop-free value estimators against their plain-loop versions,
(b) losses against hand-written plain PyTorch versions of the same maths.

Run: ``python benchmarks/bench_objectives.py`` (``make bench`` runs every benchmark). Every
ratio compares two computations measured in this run on this machine.
"""

from __future__ import annotations

import statistics
import time

import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn
from torch.nn import functional as F

from _common import smoke, timeit, write_table
from torchrl_lite.modules import (
    ExplorationType,
    ProbabilisticActor,
    QValueActor,
    TanhNormal,
    ValueOperator,
    set_exploration_type,
)
from torchrl_lite.objectives import ClipPPOLoss, DQNLoss
from torchrl_lite.objectives.value import GAE
from torchrl_lite.objectives.value.functional import (
    generalized_advantage_estimate,
    td_lambda_return_estimate,
    vec_generalized_advantage_estimate,
    vec_td_lambda_return_estimate,
)

torch.set_num_threads(1)


# -- (a) value estimators -----------------------------------------------------------------
def estimator_rows() -> list[list]:
    """Vectorized estimators vs the plain loops on ``[16, 1000, 1]`` (target: >= 5x)."""
    B, T = (16, 200) if smoke() else (16, 1000)
    g = torch.Generator().manual_seed(0)
    shape = (B, T, 1)
    value, next_value, reward = (torch.randn(shape, generator=g) for _ in range(3))
    u = torch.rand(shape, generator=g)
    terminated = u < 0.005
    done = u < 0.01  # terminated or truncated
    gamma, lmbda = 0.99, 0.95
    cases = [
        (
            "generalized_advantage_estimate",
            lambda: generalized_advantage_estimate(
                gamma, lmbda, value, next_value, reward, done, terminated
            ),
            lambda: vec_generalized_advantage_estimate(
                gamma, lmbda, value, next_value, reward, done, terminated
            ),
        ),
        (
            "td_lambda_return_estimate",
            lambda: td_lambda_return_estimate(gamma, lmbda, next_value, reward, done, terminated),
            lambda: vec_td_lambda_return_estimate(
                gamma, lmbda, next_value, reward, done, terminated
            ),
        ),
    ]
    rows = []
    for name, loop_fn, vec_fn in cases:
        loop = timeit(loop_fn, repeats=5)
        vec = timeit(vec_fn, repeats=20)
        rows.append([f"{name} [{B}, {T}, 1]", loop * 1e3, vec * 1e3, loop / vec])
    return rows


# -- (b) losses ---------------------------------------------------------------------------
def _mlp(n_in: int, n_out: int, width: int, depth: int, act=nn.Tanh) -> nn.Sequential:
    layers, size = [], n_in
    for _ in range(depth):
        layers += [nn.Linear(size, width), act()]
        size = width
    return nn.Sequential(*layers, nn.Linear(size, n_out))


def _ppo_case():
    """``ClipPPOLoss`` on a 1000-frame Pendulum batch (the seed's networks) vs plain torch."""
    from torchrl_lite.envs.libs.gym import GymEnv

    model_net = nn.Sequential(_mlp(3, 2, 128, 3), NormalParamExtractor())
    critic_net = _mlp(3, 1, 128, 3)
    actor = ProbabilisticActor(
        TensorDictModule(model_net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -1.0, "high": 1.0},
        return_log_prob=True,
    )
    critic = ValueOperator(critic_net, in_keys=["observation"])
    env = GymEnv("Pendulum-v1")
    env.set_seed(0)
    with torch.no_grad(), set_exploration_type(ExplorationType.RANDOM):
        data = env.rollout(1000, actor, break_when_any_done=False)  # [1000]
        GAE(value_network=critic, average_gae=True, gamma=0.99, lmbda=0.95)(data)
    loss_fn = ClipPPOLoss(actor, critic)

    def library():
        out = loss_fn(data)
        sum(v for k, v in out.items() if k.startswith("loss")).backward()

    obs, action = data["observation"], data["action"]  # [1000, 3], [1000, 1]
    old_log_prob = data["sample_log_prob"]  # [1000]
    adv, target = data["advantage"].squeeze(-1), data["value_target"]  # [1000], [1000, 1]

    def plain():
        loc, scale = model_net(obs)
        dist = TanhNormal(loc, scale, low=-1.0, high=1.0)
        ratio = (dist.log_prob(action) - old_log_prob).exp()  # [1000]
        objective = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
        entropy = dist.entropy().mean()
        critic_loss = F.smooth_l1_loss(critic_net(obs), target)
        with torch.no_grad():  # the same diagnostics
            ((ratio - 1).abs() > 0.2).float().mean()
            ratio.log().neg().mean()
        (objective + critic_loss - 0.01 * entropy).backward()

    return "ClipPPOLoss, Pendulum batch [1000]", library, plain


def _transitions(batch: int, obs: int, action: torch.Tensor) -> TensorDict:
    g = torch.Generator().manual_seed(1)
    return TensorDict(
        observation=torch.randn(batch, obs, generator=g),
        action=action,
        next=TensorDict(
            observation=torch.randn(batch, obs, generator=g),
            reward=torch.randn(batch, 1, generator=g),
            done=torch.zeros(batch, 1, dtype=torch.bool),
            terminated=torch.rand(batch, 1, generator=g) < 0.05,
            batch_size=[batch],
        ),
        batch_size=[batch],
    )


def _dqn_case():
    """``DQNLoss`` (target network, one-hot actions) on 256 transitions vs plain torch."""
    n_obs, n_act, batch = 8, 4, 256
    net = _mlp(n_obs, n_act, 256, 2, nn.ReLU)
    loss_fn = DQNLoss(QValueActor(net, action_space="one_hot"), gamma=0.99)
    target_net = loss_fn.target_value_network.module[0].module  # the same target values
    index = torch.randint(n_act, (batch,), generator=torch.Generator().manual_seed(0))
    data = _transitions(batch, n_obs, F.one_hot(index, n_act))

    def library():
        loss_fn(data)["loss"].backward()

    obs, action = data["observation"], data["action"]
    next_obs, reward = data["next", "observation"], data["next", "reward"]
    not_terminated = (~data["next", "terminated"]).float()

    def plain():
        pred = net(obs).gather(-1, action.argmax(-1, keepdim=True))  # [256, 1]
        with torch.no_grad():
            next_value = target_net(next_obs).max(-1, keepdim=True).values  # [256, 1]
            target = reward + 0.99 * not_terminated * next_value
            (pred - target).abs().squeeze(-1)  # the TD error written for priorities
        F.mse_loss(pred, target).backward()

    return "DQNLoss, batch [256]", library, plain


def _sac_case():
    """``SACLoss`` (2 Q-networks, target Q, learned alpha) on 256 transitions vs plain torch."""
    try:
        from torchrl_lite.objectives import SACLoss
    except ImportError:
        return None
    n_obs, n_act, batch = 17, 6, 256
    actor_net = nn.Sequential(_mlp(n_obs, 2 * n_act, 256, 2, nn.ReLU), NormalParamExtractor())
    actor = ProbabilisticActor(
        TensorDictModule(actor_net, ["observation"], ["loc", "scale"]),
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
    )
    qnet = _QNet(n_obs, n_act)
    qvalue = ValueOperator(qnet, in_keys=["observation", "action"])
    loss_fn = SACLoss(actor, qvalue, num_qvalue_nets=2, loss_function="l2", gamma=0.99)
    g = torch.Generator().manual_seed(0)
    data = _transitions(batch, n_obs, torch.rand(batch, n_act, generator=g) * 2 - 1)

    def library():
        out = loss_fn(data)
        sum(v for k, v in out.items() if k.startswith("loss")).backward()

    # two plain Q-networks and their targets, shaped like the loss's ensemble
    qs = [_QNet(n_obs, n_act) for _ in range(2)]
    targets = [_QNet(n_obs, n_act).requires_grad_(False) for _ in range(2)]
    log_alpha = nn.Parameter(torch.zeros(()))
    obs, action = data["observation"], data["action"]
    next_obs, reward = data["next", "observation"], data["next", "reward"]
    not_terminated = (~data["next", "terminated"]).float()
    target_entropy = -float(n_act)

    def plain():
        alpha = log_alpha.detach().exp()
        loc, scale = actor_net(obs)
        dist = TanhNormal(loc, scale)
        new_action = dist.rsample()
        log_prob = dist.log_prob(new_action)  # [256]
        for q in qs:  # the actor loss must not train the Q-networks
            q.requires_grad_(False)
        q_new = torch.min(qs[0](obs, new_action), qs[1](obs, new_action)).squeeze(-1)
        for q in qs:
            q.requires_grad_(True)
        actor_loss = (alpha * log_prob - q_new).mean()
        with torch.no_grad():
            next_loc, next_scale = actor_net(next_obs)
            next_dist = TanhNormal(next_loc, next_scale)
            next_action = next_dist.sample()
            next_q = torch.min(targets[0](next_obs, next_action), targets[1](next_obs, next_action))
            next_value = next_q - alpha * next_dist.log_prob(next_action).unsqueeze(-1)
            target = reward + 0.99 * not_terminated * next_value  # [256, 1]
        preds = [q(obs, action) for q in qs]
        q_loss = sum(F.mse_loss(p, target) for p in preds)
        with torch.no_grad():
            torch.max((preds[0] - target).abs(), (preds[1] - target).abs())  # TD error
        alpha_loss = -(log_alpha * (log_prob.detach() + target_entropy)).mean()
        (actor_loss + q_loss + alpha_loss).backward()

    return "SACLoss, batch [256]", library, plain


class _QNet(nn.Module):
    """``Q(s, a)``: an MLP on the concatenated observation and action."""

    def __init__(self, n_obs: int, n_act: int):
        super().__init__()
        self.net = _mlp(n_obs + n_act, 1, 256, 2, nn.ReLU)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], -1))


def loss_rows() -> list[list]:
    """Forward+backward of the losses vs hand-written plain PyTorch (target: <= 1.2x)."""
    repeats = 10 if smoke() else 50
    rows = []
    for make in (_ppo_case, _sac_case, _dqn_case):
        torch.manual_seed(0)
        case = make()
        if case is None:
            rows.append(["SACLoss, batch [256]", "not available", "", ""])
            continue
        name, library, plain = case
        lib, ref = _paired_times(library, plain, repeats)
        rows.append([name, ref * 1e3, lib * 1e3, lib / ref])
    return rows


def _paired_times(fn_a, fn_b, repeats: int, rounds: int = 3) -> tuple[float, float]:
    """Median times of ``fn_a`` and ``fn_b`` called alternately (so that load from other
    processes hits both alike); the lowest median of ``rounds`` rounds for each."""
    for _ in range(3):  # warm-up
        fn_a()
        fn_b()
    best_a = best_b = float("inf")
    for _ in range(rounds):
        times_a, times_b = [], []
        for _ in range(repeats):
            start = time.perf_counter()
            fn_a()
            mid = time.perf_counter()
            fn_b()
            times_a.append(mid - start)
            times_b.append(time.perf_counter() - mid)
        best_a = min(best_a, statistics.median(times_a))
        best_b = min(best_b, statistics.median(times_b))
    return best_a, best_b


def main() -> None:
    write_table(
        "objectives_estimators",
        "Value estimators: loop-free vs plain loop over time",
        ["function", "loop (ms)", "vec_ (ms)", "speed-up"],
        estimator_rows(),
        notes=(
            "gamma=0.99, lmbda=0.95, ~1% of steps done (half of them terminated); "
            "median of 5 (loop) / 20 (vec) runs, 1 torch thread. Target speed-up >= 5."
        ),
    )
    write_table(
        "objectives_losses",
        "Losses: forward + backward, library vs hand-written plain PyTorch",
        ["loss", "plain (ms)", "torchrl_lite (ms)", "ratio"],
        loss_rows(),
        notes=(
            "Same networks, same maths and diagnostics; calls alternate between the two "
            "versions, lowest of 3 medians of 50 calls each; 1 torch thread. Target ratio "
            "<= 1.2."
        ),
    )


if __name__ == "__main__":
    main()
