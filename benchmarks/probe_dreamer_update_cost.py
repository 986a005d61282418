"""What one Dreamer update costs with the two-core defaults and at the paper's sizes (issue 17).

Builds the ``dreamer`` recipe on dm_control cartpole-swingup, fills its buffer with one
random batch, then times sample + loss + the recipe's optimizer step (backward, per-part
clip, step). One torch thread. Run:
``MUJOCO_GL=egl python benchmarks/probe_dreamer_update_cost.py``; results in
``benchmarks/results/pixels.md``.
"""

import time

import torch

from torchrl_lite.recipes import config_for, get_recipe
from torchrl_lite.recipes.dreamer import FULL_SIZE


def update_seconds(repeats=4, **sizes):
    recipe = get_recipe("dreamer")
    steps = sizes.get("batch_size", 16) * sizes.get("slice_len", 32) + 64
    cfg = config_for(
        recipe, **{**sizes, "init_random_frames": steps, "frames_per_batch": steps,
                   "frames": steps, "optim_steps_per_batch": 0},
    )  # fmt: skip
    trainer, _ = recipe.make_trainer(cfg, progress_bar=False)
    trainer.train()  # one random batch fills the buffer
    buffer = trainer._modules["replay_buffer"].replay_buffer
    step = trainer._modules["optimizer"]  # the recipe's OptimizerHook: backward, clip, step
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(trainer.loss_module(buffer.sample(cfg.batch_size * cfg.slice_len)),
             clip_norm=cfg.max_grad_norm)  # fmt: skip
        times.append(time.perf_counter() - start)
    return times


if __name__ == "__main__":
    torch.set_num_threads(1)
    for name, sizes in [("two-core defaults", {}), ("FULL_SIZE", FULL_SIZE)]:
        times = update_seconds(**sizes)
        print(f"{name}: {', '.join(f'{t:.2f}' for t in times)} s per update")
