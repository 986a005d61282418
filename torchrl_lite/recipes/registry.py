"""The recipes by name, and the :class:`Recipe` record each recipe file ends with.

The registry maps a name to the recipe's module path, so the command line can check an
algorithm name (and, through :mod:`~torchrl_lite.recipes.fields`, its ``key=value``
options) before torch is imported. :func:`get_recipe` imports the module and returns its
``RECIPE``: what the command line, the Scheme path and ``tune`` need to know about a recipe,
stated once instead of read from module attributes with defaults.

Example:
    >>> recipe = get_recipe("ppo")
    >>> recipe.name, recipe.Config().env, recipe.offline
    ('ppo', 'Pendulum-v1', False)
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable, Mapping

from torchrl_lite._utils import did_you_mean

__all__ = ["RECIPES", "Recipe", "get_recipe", "recipe_key"]

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


@dataclasses.dataclass(frozen=True)
class Recipe:
    """What a recipe file offers the command line, the Scheme path and ``tune``.

    Attributes other than these fields are read from the recipe's module (its other
    builders, e.g. ``get_recipe("ppo").make_actor_critic``), so user scripts keep calling
    them through the record.

    Args:
        name: the registry key and ``config.json``'s ``"algo"`` (``"ppo"``).
        Config: the frozen config dataclass; its defaults are the classic-control ones.
        module: the recipe's module path (its builders).
        make_trainer: ``(cfg, logger=None, checkpoint=None, progress_bar=True) ->
            (trainer, policy)``.
        make_eval_env: ``(cfg, **env_kwargs) -> env`` for evaluation and videos.
        actions: the action space the algorithm needs (for messages).
        targets: env id -> the mean return that solves it (the run stops there).
        env_defaults: env family (``"mujoco"``, ``"dm_control"``, ``"atari"``) -> the
            fields that family changes (see :func:`~torchrl_lite.envs.make.env_family`).
        pixel_defaults: the fields ``pixels=true`` changes (other overrides still win).
        offline: learns from a dataset: its frames are gradient steps and its learning
            signal is evaluation episodes (``make_evaluation``).
        make_evaluation: ``(cfg, policy, target) -> hook`` of an offline recipe.
    """

    name: str
    Config: type
    module: str
    make_trainer: Callable
    make_eval_env: Callable
    actions: str
    targets: Mapping[str, float] = dataclasses.field(default_factory=dict)
    env_defaults: Mapping[str, dict] = dataclasses.field(default_factory=dict)
    pixel_defaults: Mapping[str, object] = dataclasses.field(default_factory=dict)
    offline: bool = False
    make_evaluation: Callable | None = None

    @property
    def ALGO(self) -> str:  # noqa: N802 - the recipe files' constant, kept for user scripts
        return self.name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):  # copy/pickle probes: not the module's
            raise AttributeError(attr)
        module = sys.modules.get(self.module) or importlib.import_module(self.module)
        try:
            return getattr(module, attr)
        except AttributeError:
            raise AttributeError(f"recipe {self.name!r} has no {attr!r}") from None


def recipe_key(name: str) -> str:
    """The ``RECIPES`` key of an algorithm name (imports nothing); ValueError naming the
    known ones otherwise."""
    key = name.lower().replace("-", "_").replace("+", "_")
    if key not in RECIPES:
        hint = did_you_mean(key, list(RECIPES))
        raise ValueError(f"Unknown algorithm {name!r}.{hint} Known: {', '.join(RECIPES)}.")
    return key


def get_recipe(name: str) -> Recipe:
    """The :class:`Recipe` of an algorithm; ValueError naming the known ones otherwise."""
    return importlib.import_module(RECIPES[recipe_key(name)]).RECIPE
