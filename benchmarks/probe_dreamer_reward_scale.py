"""Does the pixel world model learn what the reward needs? (issue 17, session 16)

Trains the ``dreamer`` recipe's world model alone (no actor, no value model) on 10 episodes
of uniform random actions from dm_control cartpole-swingup pixels, with the recipe's
sizes, batch (16 slices of 32 steps), Adam step and gradient clip, once for each
``reward_scale`` given. Every 100 updates it filters 2 held-out random episodes with the
posterior and prints the reward head's mean absolute error on them, next to the training
reconstruction and reward terms and the raw KL. A constant prediction of the training
mean scores about 0.26 on the held-out episodes, their median about 0.13.

Run: ``MUJOCO_GL=egl python benchmarks/probe_dreamer_reward_scale.py 1,30 500``
(scales, updates; ~0.8 s per update on a free core). The episodes are drawn once and kept
in ``--data`` (default ``/tmp/dreamer_random_episodes.pt``). Results in
``benchmarks/results/pixels.md``.
"""

import argparse
import time
from dataclasses import replace
from pathlib import Path

import torch

from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.common import PIXELS_STACK

EPISODES, TEST, STEPS = 12, 2, 250


def random_episodes(recipe, cfg, path: Path):
    if path.exists():
        return torch.load(path, weights_only=False)
    env = recipe.make_train_env(cfg)
    torch.manual_seed(123)
    episodes = torch.stack(
        [env.rollout(STEPS, break_when_any_done=False) for _ in range(EPISODES)]
    )  # [E, T]: uniform random actions (no policy)
    keep = (PIXELS_STACK, "action", ("next", PIXELS_STACK), ("next", "reward"))
    episodes = episodes.select(*keep)
    torch.save(episodes, path)
    return episodes


def train_model(recipe, cfg, episodes, reward_scale: float, updates: int, seed: int = 0):
    train, test = episodes[:-TEST], episodes[-TEST:]
    torch.manual_seed(seed)
    loss = recipe.make_model_loss(
        replace(cfg, reward_scale=reward_scale), recipe.make_train_env(cfg)
    )
    optimizer = torch.optim.Adam(loss.parameters(), lr=cfg.model_lr)
    g = torch.Generator().manual_seed(seed)
    start = time.time()
    for update in range(1, updates + 1):
        episode = torch.randint(0, train.shape[0], (cfg.batch_size,), generator=g)
        first = torch.randint(0, STEPS - cfg.slice_len, (cfg.batch_size,), generator=g)
        steps = first[:, None] + torch.arange(cfg.slice_len)  # [B, T]
        out = loss(train[episode[:, None].expand_as(steps), steps])
        total = out["loss_model_kl"] + out["loss_model_reco"] + out["loss_model_reward"]
        optimizer.zero_grad()
        total.backward()
        torch.nn.utils.clip_grad_norm_(loss.parameters(), cfg.max_grad_norm)
        optimizer.step()
        if update % 100 == 0:
            out = out.detach()
            with torch.no_grad():
                *_, states, beliefs = loss.observe(
                    test[PIXELS_STACK], test["next", PIXELS_STACK], test["action"]
                )
                predicted = loss.reward_head(torch.cat([states, beliefs], -1))
                error = (predicted - test["next", "reward"]).abs().mean()
            print(
                f"reward_scale {reward_scale:g} update {update}: held-out reward MAE "
                f"{float(error):.3f}, reco {float(out['loss_model_reco']):.2f}, reward term "
                f"{float(out['loss_model_reward']) / reward_scale:.3f} (unweighted), "
                f"KL {float(out['kl']):.2f}, {time.time() - start:.0f} s",
                flush=True,
            )


if __name__ == "__main__":
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scales", help="comma-separated reward_scale values, e.g. 1,30")
    parser.add_argument("updates", type=int)
    parser.add_argument("--data", type=Path, default=Path("/tmp/dreamer_random_episodes.pt"))
    args = parser.parse_args()
    recipe = get_recipe("dreamer")
    cfg = config_for(recipe)
    episodes = random_episodes(recipe, cfg, args.data)
    for scale in args.scales.split(","):
        train_model(recipe, cfg, episodes, float(scale), args.updates)
