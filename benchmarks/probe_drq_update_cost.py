"""What one DrQ update costs at the recipe's sizes and at the paper's (issue 17).

Plain torch, independent of the library: the target encoder and the target Q-networks on
the augmented next frames, the online encoder and two Q-heads with a backward pass and an
Adam step, then an actor step on the detached features. One torch thread. Run:
``python benchmarks/probe_drq_update_cost.py``; results in ``benchmarks/results/pixels.md``.
"""

import time

import torch
from torch import nn

# (name, batch, augmented copies, channels, image size, conv strides, hidden units)
SHAPES = [
    ("recipe (pixels=true)", 128, 1, 4, 64, (2, 2, 1), 256),
    ("DrQ paper", 512, 2, 9, 84, (2, 1, 1, 1), 1024),
]


def encoder(channels, strides):
    layers, c = [], channels
    for stride in strides:
        layers += [nn.Conv2d(c, 32, 3, stride), nn.ReLU()]
        c = 32
    return nn.Sequential(*layers, nn.Flatten()).to(memory_format=torch.channels_last)


def mlp(n_in, n_out, hidden):
    return nn.Sequential(
        nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, n_out),
    )  # fmt: skip


def update_seconds(batch, copies, channels, size, strides, hidden, repeats=4):
    enc, target_enc = encoder(channels, strides), encoder(channels, strides)
    with torch.no_grad():
        n_features = enc(torch.zeros(1, channels, size, size)).shape[-1]
    proj = nn.Sequential(nn.Linear(n_features, 50), nn.LayerNorm(50), nn.Tanh())
    q1, q2, actor = mlp(51, 1, hidden), mlp(51, 1, hidden), mlp(50, 2, hidden)
    critic = [*enc.parameters(), *proj.parameters(), *q1.parameters(), *q2.parameters()]
    critic_opt = torch.optim.Adam(critic, 1e-3)
    actor_opt = torch.optim.Adam(actor.parameters(), 1e-3)
    images = torch.rand(batch * copies, channels, size, size)
    images = images.contiguous(memory_format=torch.channels_last)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        with torch.no_grad():
            next_features = proj(target_enc(images))
            next_action = torch.tanh(actor(next_features)[:, :1])
            q_in = torch.cat([next_features, next_action], -1)
            target = torch.min(q1(q_in), q2(q_in))
        features = proj(enc(images))
        q_in = torch.cat([features, torch.rand(batch * copies, 1)], -1)
        critic_loss = ((q1(q_in) - target) ** 2).mean() + ((q2(q_in) - target) ** 2).mean()
        critic_opt.zero_grad()
        critic_loss.backward()
        critic_opt.step()
        detached = features.detach()[:batch]
        action = torch.tanh(actor(detached)[:, :1])
        actor_loss = -q1(torch.cat([detached, action], -1)).mean()
        actor_opt.zero_grad()
        actor_loss.backward()
        actor_opt.step()
        times.append(time.perf_counter() - start)
    return times


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name, batch, copies, channels, size, strides, hidden in SHAPES:
        times = update_seconds(batch, copies, channels, size, strides, hidden)
        print(
            f"{name}: batch {batch} x {copies} copies, {channels}x{size}x{size}, strides "
            f"{strides}, {hidden} units: {', '.join(f'{t:.2f}' for t in times)} s per update"
        )
