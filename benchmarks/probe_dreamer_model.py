"""How far a trained Dreamer's imagination can be trusted (issue 17).

Loads a ``dreamer`` run folder, plays one real episode with its policy (sampled actions
plus the collection noise), then compares, on that episode:

- the reward head on the *filtered* states (posterior, one step after each observation)
  with the real rewards;
- the reward head on *open-loop* states: from the filtered state at every 5th step, the
  prior alone imagines ``HORIZON`` steps with the episode's real actions (what the actor
  sees in imagination, but with the actions that were taken), error per imagined step;
- the value model on the filtered states with the real discounted return-to-go.

Run: ``MUJOCO_GL=egl python benchmarks/probe_dreamer_model.py RUN [--seed N]``; results in
``benchmarks/results/pixels.md``.
"""

import argparse
from pathlib import Path

import torch

from torchrl_lite.cli import trained_trainer
from torchrl_lite.envs.utils import ExplorationType, set_exploration_type

HORIZON = 15


@torch.no_grad()
def probe(run: Path, seed: int = 1, gamma: float = 0.99) -> dict:
    recipe, cfg, trainer, policy = trained_trainer(run)
    model, value = trainer.loss_module.model_loss, trainer.loss_module.actor_loss.value_model
    key = recipe.obs_key(cfg)
    env = recipe.make_eval_env(cfg)
    torch.manual_seed(seed)
    with set_exploration_type(ExplorationType.RANDOM):
        episode = env.rollout(10_000, policy)
    obs, nxt = episode[key], episode["next", key]
    action, reward = episode["action"], episode["next", "reward"][:, 0]
    steps = episode.shape[0]
    belief = torch.zeros(1, model.prior.belief_dim)
    state = model.posterior(belief, model.encoder(obs[:1]))[2]
    # DreamerModelLoss.observe filters too, but keeps s_0 to itself: the open-loop starts
    # and the values need the state after every observation, s_0 included
    filtered = [(state, belief)]  # the model state after observing o_t, t = 0..T
    for t in range(steps):
        belief = model.prior(state, belief, action[t : t + 1])[3]
        state = model.posterior(belief, model.encoder(nxt[t : t + 1]))[2]
        filtered.append((state, belief))
    features = torch.cat([torch.cat(x, -1) for x in filtered])  # [T + 1, S + D]
    filtered_error = (model.reward_head(features[1:])[:, 0] - reward).abs().mean()
    open_loop = torch.zeros(HORIZON)
    starts = range(0, steps - HORIZON, 5)
    for t0 in starts:
        state, belief = filtered[t0]
        for k in range(HORIZON):
            _, _, state, belief = model.prior(state, belief, action[t0 + k : t0 + k + 1])
            predicted = model.reward_head(torch.cat([state, belief], -1))[0, 0]
            open_loop[k] += (predicted - reward[t0 + k]).abs() / len(starts)
    to_go = torch.zeros(steps)
    running = 0.0
    for t in reversed(range(steps)):
        running = float(reward[t]) + gamma * running
        to_go[t] = running
    values = value(features[:-1])[:, 0]
    marks = [t for t in (0, 50, 100, 150, 200) if t < steps]
    return {
        "return": float(reward.sum()),
        "reward_mean": float(reward.mean()),
        "reward_std": float(reward.std()),
        "filtered_reward_mae": float(filtered_error),
        "open_loop_reward_mae": [round(float(e), 3) for e in open_loop],
        "value_vs_return_to_go": [
            (t, round(float(values[t]), 1), round(float(to_go[t]), 1)) for t in marks
        ],
    }


if __name__ == "__main__":
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    for name, result in probe(args.run, args.seed).items():
        print(f"{name}: {result}")
