"""Ready-made builders per algorithm, used by the CLI and readable as examples.

Each recipe module has a frozen ``Config`` dataclass (defaults that learn), builders
(``make_train_env``, ``make_eval_env``, networks, loss) and ``make_trainer(cfg, logger,
checkpoint, progress_bar) -> (trainer, policy)``, plus ``ALGO``, ``ACTIONS`` (the action
space it needs), ``TARGETS`` (returns the learning benchmark aims at) and
``ENV_DEFAULTS`` (settings per env family: ``"mujoco"``, ``"dm_control"``, see
:func:`~torchrl_lite.recipes.common.env_family`).

Example:
    >>> recipe = get_recipe("ppo")
    >>> recipe.Config().env
    'Pendulum-v1'
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib

__all__ = ["RECIPES", "get_recipe", "recipe_key", "config_for"]

RECIPES = {
    "ppo": "torchrl_lite.recipes.ppo",
    "a2c": "torchrl_lite.recipes.a2c",
    "dqn": "torchrl_lite.recipes.dqn",
    "ddpg": "torchrl_lite.recipes.ddpg",
    "td3": "torchrl_lite.recipes.td3",
    "sac": "torchrl_lite.recipes.sac",
    "redq": "torchrl_lite.recipes.redq",
    "cql": "torchrl_lite.recipes.cql",
    "iql": "torchrl_lite.recipes.iql",
    "td3_bc": "torchrl_lite.recipes.td3_bc",
    "dreamer": "torchrl_lite.recipes.dreamer",
    "dt": "torchrl_lite.recipes.dt",
    "odt": "torchrl_lite.recipes.odt",
}


def recipe_key(name: str) -> str:
    """The ``RECIPES`` key of an algorithm name (imports nothing); ValueError naming the
    known ones otherwise."""
    key = name.lower().replace("-", "_").replace("+", "_")
    if key not in RECIPES:
        close = difflib.get_close_matches(key, list(RECIPES), n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"Unknown algorithm {name!r}.{hint} Known: {', '.join(RECIPES)}.")
    return key


def get_recipe(name: str):
    """The recipe module of an algorithm; ValueError naming the known ones otherwise."""
    return importlib.import_module(RECIPES[recipe_key(name)])


def config_for(recipe, env: str | None = None, **changes):
    """The recipe's ``Config`` for ``env`` (with its env-family defaults) and ``changes``."""
    from torchrl_lite.recipes.common import env_family

    cfg = recipe.Config()
    env = env or cfg.env
    defaults = getattr(recipe, "ENV_DEFAULTS", {}).get(env_family(env))
    if defaults:
        cfg = dataclasses.replace(cfg, **defaults)
    if changes.get("pixels"):  # pixel observations: the recipe's settings for them
        cfg = dataclasses.replace(cfg, **getattr(recipe, "PIXEL_DEFAULTS", {}))
    return dataclasses.replace(cfg, env=env, **changes)
