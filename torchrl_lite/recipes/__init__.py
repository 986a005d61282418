"""Ready-made training setups per algorithm, used by the CLI and readable as examples.

Each recipe file has a frozen ``Config`` dataclass (defaults that learn), its builders
(``make_train_env``, ``make_eval_env``, networks, loss, ``make_trainer(cfg, logger,
checkpoint, progress_bar) -> (trainer, policy)``) and ends with its
:class:`~torchrl_lite.recipes.registry.Recipe` record (targets, env-family and pixel
defaults, offline or not). :func:`get_recipe` finds it by name;
:func:`~torchrl_lite.recipes.config.resolve` turns it, an env id and ``key=value`` options
into a run's config.

Example:
    >>> recipe = get_recipe("ppo")
    >>> recipe.Config().env
    'Pendulum-v1'
"""

from __future__ import annotations

from torchrl_lite.recipes.config import apply_overrides, config_for, resolve
from torchrl_lite.recipes.registry import RECIPES, Recipe, get_recipe, recipe_key

__all__ = [
    "RECIPES",
    "Recipe",
    "apply_overrides",
    "config_for",
    "get_recipe",
    "recipe_key",
    "resolve",
]
