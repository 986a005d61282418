"""Can a conv net read CartPole's velocities from the pixel observation? (issue 17, item 3)

DQN CartPole-v1 from pixels stayed near random; one suspect was the observation: at
64x64 the 600x400 render shrinks ~9x, the pole is ~1 pixel wide and moves less than a
pixel per step, so a 4-frame stack might not show the velocities. This probe answers it
without RL: random-policy episodes (probability of "right" drawn per episode), the
recipe's preprocessing (grayscale, area resize, 4 stacked frames) and two crops of the
band where the cart and pole are drawn (rows 160-320), then the DQN recipe's
``PixelEncoder`` + MLP regresses the state ``(x, x_dot, theta, theta_dot)`` (standardized)
from the stack; R^2 on held-out episodes (every 5th).

Usage: ``python probe_cartpole_pixels.py [FRAMES]`` (default 300; ~1.5 min per variant
on one core).
"""

from __future__ import annotations

import sys
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F

from torchrl_lite.recipes.common import PixelEncoder

LUMA = torch.tensor([0.2989, 0.587, 0.114])
VARIANTS = {  # name: (rows kept, output size)
    "full64": ((0, 400), (64, 64)),  # what pixels=true observes
    "band40x150": ((160, 320), (40, 150)),
    "band64x120": ((160, 320), (64, 120)),
}


def prep(frame: np.ndarray, rows, size) -> torch.Tensor:
    gray = (torch.from_numpy(frame).float() @ LUMA)[rows[0] : rows[1]]  # [h, 600]
    small = F.adaptive_avg_pool2d(gray[None, None], size)[0, 0]
    return small.round().clamp(0, 255).to(torch.uint8)


def collect(frames: int, seed: int = 0):
    env = gym.make("CartPole-v1", render_mode="rgb_array")
    rng = np.random.default_rng(seed)
    data = {k: [] for k in VARIANTS}
    states, episodes, n = [], [], 0
    while len(states) < frames:
        env.reset(seed=int(rng.integers(1 << 30)))
        stacks = {k: [prep(env.render(), *v)] * 4 for k, v in VARIANTS.items()}
        p_right, done = rng.uniform(0.3, 0.7), False
        while not done:
            obs, _, term, trunc, _ = env.step(int(rng.random() < p_right))
            done = term or trunc
            frame = env.render()
            for k, v in VARIANTS.items():
                stacks[k] = stacks[k][1:] + [prep(frame, *v)]
                data[k].append(torch.stack(stacks[k]))  # [4, h, w]
            states.append(torch.as_tensor(obs))
            episodes.append(n)
        n += 1
    env.close()
    return {k: torch.stack(v) for k, v in data.items()}, torch.stack(states), torch.tensor(episodes)


def r2_per_dim(x: torch.Tensor, y: torch.Tensor, test: torch.Tensor, steps: int = 2000):
    torch.manual_seed(0)
    enc = PixelEncoder(4)
    net = torch.nn.Sequential(
        enc, torch.nn.Linear(enc.out_features(x.shape[1:]), 256), torch.nn.ReLU(),
        torch.nn.Linear(256, y.shape[-1]),
    )  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), lr=3e-4)
    x_train, y_train = x[~test], y[~test]
    for _ in range(steps):
        idx = torch.randint(0, len(x_train), (64,))
        loss = F.mse_loss(net(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        err = (net(x[test]) - y[test]).pow(2).mean(0)
    return (1 - err / y[test].var(0)).tolist()


def main(frames: int) -> None:
    torch.set_num_threads(1)
    data, states, episodes = collect(frames)
    y = (states - states.mean(0)) / states.std(0)
    test = episodes % 5 == 0
    print(f"{len(states)} frames, {int(episodes.max()) + 1} episodes")
    for name, x in data.items():
        start = time.perf_counter()
        r2 = r2_per_dim(x, y, test)
        print(
            f"{name:11s} {tuple(x.shape[-2:])}: R^2 x, x_dot, theta, theta_dot = "
            f"{[round(v, 3) for v in r2]} ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
