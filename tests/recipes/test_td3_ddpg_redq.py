"""TD3, DDPG and REDQ recipes: short learning runs move the right way; TD3's delayed
updates, the exploration noise and checkpoints do what the recipes say."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.modules import ExplorationType, set_exploration_type
from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import EpisodeReturns

SMALL = dict(init_random_frames=20, frames_per_batch=10, batch_size=32)  # wiring tests


def _build(algo: str, **changes):
    recipe = get_recipe(algo)
    cfg = config_for(recipe, "Pendulum-v1", **changes)
    trainer, policy = recipe.make_trainer(cfg, progress_bar=False)
    return trainer, policy


def _train(algo: str, **changes) -> list[float]:
    trainer, _ = _build(algo, **changes)
    episodes = EpisodeReturns()
    episodes.register(trainer)
    trainer.train()
    return [r for _, r in episodes.history]


def _mean(values) -> float:
    return sum(values) / len(values)


# -- learning ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "algo, changes",
    [
        ("td3", dict(frames=3_000)),
        ("ddpg", dict(frames=3_000)),
        ("redq", dict(frames=2_800, utd_ratio=2.0, num_qvalue_nets=4)),  # a cheaper ensemble
    ],
)
def test_recipe_learns_pendulum_short(algo, changes):
    returns = _train(algo, **changes)
    first, last = _mean(returns[:3]), _mean(returns[-3:])
    assert last > first + 200, (first, last, returns)


# -- wiring --------------------------------------------------------------------------
def _flat(module) -> torch.Tensor:
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).clone()


def _target_flat(module) -> torch.Tensor:
    return torch.cat([b.detach().reshape(-1) for b in module.buffers()]).clone()


def test_td3_recipe_delays_actor_and_target_updates():
    delay = 3
    trainer, _ = _build("td3", frames=60, policy_delay=delay, **SMALL)
    loss = trainer.loss_module
    nets = {
        "actor": lambda: _flat(loss.actor_network),
        "critic": lambda: _flat(loss.qvalue_network),
        "target_actor": lambda: _target_flat(loss.target_actor_network),
        "target_critic": lambda: _target_flat(loss.target_qvalue_network),
    }
    last = {name: get() for name, get in nets.items()}
    moved: dict[str, list[bool]] = {name: [] for name in nets}

    def record():
        for name, get in nets.items():
            now = get()
            moved[name].append(not torch.equal(now, last[name]))
            last[name] = now

    trainer.register_op("post_optim", record)
    trainer.train()
    steps = trainer.optim_count
    assert steps == 40  # (60 - 20) frames, one update per frame
    delayed = [(i + 1) % delay == 0 for i in range(steps)]
    assert moved["critic"] == [True] * steps
    assert moved["actor"] == delayed
    assert moved["target_actor"] == delayed
    assert moved["target_critic"] == delayed
    actor_adam = trainer.state_dict()["hooks"]["actor_optimizer"]["optimizer"]["state"]
    assert all(int(s["step"]) == steps // delay for s in actor_adam.values())


@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_exploration_noise_only_while_exploring(algo):
    trainer, actor = _build(algo, frames=20, exploration_noise=0.25, **SMALL)
    behaviour = trainer.collector.policy
    spec = trainer.collector.env.action_spec
    obs = TensorDict(observation=torch.randn(256, 3), batch_size=[256])
    with torch.no_grad():
        greedy = actor(obs.clone())["action"]
        with set_exploration_type(ExplorationType.DETERMINISTIC):
            evaluated = behaviour(obs.clone())["action"]
        with set_exploration_type(ExplorationType.RANDOM):
            explored = behaviour(obs.clone())["action"]
    torch.testing.assert_close(evaluated, greedy)
    noise = explored - greedy
    assert bool((explored >= spec.low).all() and (explored <= spec.high).all())
    inside = (greedy.abs() < 0.5).squeeze(-1)  # 3 sigma from the bounds: hardly clipped
    assert int(inside.sum()) > 50
    assert 0.4 < float(noise[inside].std()) < 0.6  # sigma: 0.25 of the half-range 2


@pytest.mark.parametrize("algo", ["td3", "ddpg", "redq"])
def test_recipe_resumes_exactly(tmp_path, algo):
    straight, _ = _build(algo, frames=60, utd_ratio=1.0, **SMALL)
    straight.train()
    first, _ = _build(algo, frames=40, utd_ratio=1.0, **SMALL)
    first.save_trainer_file = tmp_path / "ckpt"
    first.train()
    resumed, _ = _build(algo, frames=60, utd_ratio=1.0, **SMALL)
    resumed.load(tmp_path / "ckpt")
    resumed.train()
    assert resumed.optim_count == straight.optim_count == 40
    torch.testing.assert_close(
        resumed.loss_module.state_dict(), straight.loss_module.state_dict(), rtol=0, atol=0
    )
