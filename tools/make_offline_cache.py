"""Fill the D4RL / Minari cache folders with small datasets made from our own rollouts.

TorchRL's offline example scripts take no dataset path: they read
``D4RLExperienceReplay("halfcheetah-medium-v2", ...)`` and the like from the usual cache
folders (d4rl's ``~/.d4rl/datasets``, Minari's ``~/.minari/datasets``). Nothing can be
downloaded here, so this writes a small dataset in exactly that layout from rollouts of
the matching env (uniform random actions: enough to run a script, not to learn well).

Usage::

    python tools/make_offline_cache.py d4rl halfcheetah-medium-v2 --env HalfCheetah-v4
    python tools/make_offline_cache.py minari mujoco/hopper/expert-v0 --env Hopper-v4
    python tools/make_offline_cache.py torchrl-ci      # the datasets TorchRL's CI scripts read

``torchrl-ci`` also writes a synthetic OpenML ``adult`` table (random rows with the real
table's columns) into scikit-learn's OpenML cache for the bandit example's ``OpenMLEnv``.

``--out DIR`` writes elsewhere than the default folder ($D4RL_DATASET_DIR /
$MINARI_DATASETS_PATH are honoured too).
"""

from __future__ import annotations

import argparse
import sys

# The datasets TorchRL's CI commands read (both eras): kind, dataset id, env id.
TORCHRL_CI = [
    ("d4rl", "halfcheetah-medium-v2", "HalfCheetah-v4"),
    ("d4rl", "hopper-medium-v2", "Hopper-v4"),
    ("d4rl", "halfcheetah-expert-v2", "HalfCheetah-v4"),  # GAIL's expert data
    ("minari", "mujoco/hopper/expert-v0", "Hopper-v4"),
]


def make(kind: str, dataset_id: str, env_id: str, frames: int, seed: int, out) -> str:
    from torchrl_lite.data.datasets.cache_writers import (
        random_transitions,
        write_d4rl_cache,
        write_minari_hdf5,
    )
    from torchrl_lite.envs import GymEnv

    env = GymEnv(env_id)
    try:
        data = random_transitions(env, frames, seed=seed)
    finally:
        env.close()
    if kind == "d4rl":
        return str(write_d4rl_cache(dataset_id, data, out))
    return str(write_minari_hdf5(dataset_id, data, out, env_id=env_id))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kind", choices=["d4rl", "minari", "torchrl-ci"])
    parser.add_argument("dataset_id", nargs="?", help="e.g. halfcheetah-medium-v2")
    parser.add_argument("--env", help="the gymnasium env id to roll out")
    parser.add_argument("--frames", type=int, default=2000, help="transitions to write")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="a folder instead of the default cache")
    args = parser.parse_args(argv)
    if args.kind == "torchrl-ci":
        jobs = TORCHRL_CI
    elif args.dataset_id is None or args.env is None:
        parser.error(f"{args.kind} needs DATASET_ID and --env ENV_ID")
    else:
        jobs = [(args.kind, args.dataset_id, args.env)]
    for kind, dataset_id, env_id in jobs:
        path = make(kind, dataset_id, env_id, args.frames, args.seed, args.out)
        print(f"{kind} {dataset_id}: {args.frames} transitions of {env_id} -> {path}")
    if args.kind == "torchrl-ci":
        path = make_openml_adult(args.frames, args.seed, args.out)
        print(f"openml adult: {args.frames} synthetic rows -> {path}")
    return 0


def make_openml_adult(rows: int, seed: int, out) -> str:
    """OpenML's ``adult`` (version 1) in scikit-learn's cache: synthetic rows."""
    from torchrl_lite.envs.libs.openml_cache import (
        ADULT_COLUMNS,
        ADULT_DATA_ID,
        synthetic_adult,
        write_openml_cache,
    )

    path = write_openml_cache(
        "adult",
        synthetic_adult(rows, seed=seed),
        ADULT_COLUMNS,
        target="class",
        data_id=ADULT_DATA_ID,
        data_home=out,
        note="SYNTHETIC rows with the columns of OpenML's adult table (random values, not "
        "the real data), written by tools/make_offline_cache.py for offline runs.",
    )
    return str(path)


if __name__ == "__main__":
    sys.exit(main())
