"""One place that turns a recipe, an env id and ``key=value`` options into a run's config.

:func:`resolve` applies, in order: the recipe's ``Config`` defaults, its env-family
defaults (``recipe.env_defaults``), the overrides (``pixels=true`` brings the recipe's
``pixel_defaults``, the other overrides still win), the range checks of every option the
user set, and for a resumed run the guards that keep its checkpoint loadable. It also
fixes what a run records in ``config.json``: the dataset as an absolute path and the
target return in force. :func:`config_for` and :func:`apply_overrides` are its first two
steps, for scripts that build a config by hand.

Example:
    >>> from torchrl_lite.recipes import get_recipe
    >>> cfg = resolve(get_recipe("ppo"), "Pendulum-v1", {"lr": "1e-3"})
    >>> cfg.lr, cfg.target
    (0.001, -200.0)
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from torchrl_lite.recipes.fields import parse_value, unknown_option
from torchrl_lite.recipes.ranges import STRUCTURAL, check_ranges
from torchrl_lite.recipes.registry import Recipe, get_recipe

__all__ = ["apply_overrides", "config_for", "resolve", "resolve_target", "saved_config"]


def config_for(recipe: Recipe, env: str | None = None, **changes):
    """The recipe's ``Config`` for ``env`` (with its env-family defaults) and ``changes``
    (typed values; ``pixels=True`` brings the recipe's pixel defaults first)."""
    from torchrl_lite.envs.make import env_family

    cfg = recipe.Config()
    env = env or cfg.env
    defaults = recipe.env_defaults.get(env_family(env))
    if defaults:
        cfg = dataclasses.replace(cfg, **defaults)
    return apply_overrides(cfg, {"env": env, **changes}, recipe)


def apply_overrides(config, overrides: dict, recipe: Recipe | None = None):
    """A copy of a frozen config dataclass with ``key=value`` options applied.

    Strings are parsed by the field's type (:func:`~torchrl_lite.recipes.fields.parse_value`;
    other values are used as they are); an unknown key raises ValueError naming the closest
    field. Turning ``pixels`` on also applies the recipe's ``pixel_defaults`` (the other
    overrides still win); ``recipe`` defaults to the one that defines ``config``'s class.
    """
    fields = {f.name: f for f in dataclasses.fields(config)}
    changes = {}
    for key, text in overrides.items():
        if key not in fields:
            raise unknown_option(key, fields, type(config).__name__)
        changes[key] = parse_value(text, type(getattr(config, key)), key)
    if changes.get("pixels") and not getattr(config, "pixels", False):
        recipe = recipe or _recipe_of(config)
        changes = {**recipe.pixel_defaults, **changes}
    return dataclasses.replace(config, **changes)


def _recipe_of(config) -> Recipe:
    module = type(config).__module__
    return get_recipe(module.rsplit(".", 1)[-1])


def saved_config(recipe: Recipe, saved: dict):
    """The ``Config`` recorded in a run's ``config.json`` (``saved``; JSON lists back to
    tuples)."""
    values = saved["config"]
    return recipe.Config(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


def resolve(
    recipe: Recipe,
    env: str | None = None,
    overrides: dict | None = None,
    saved: dict | None = None,
    *,
    typed: dict[str, str] | None = None,
    distributed: bool = False,
):
    """The config a run trains with.

    Args:
        recipe: the algorithm's :class:`~torchrl_lite.recipes.registry.Recipe`.
        env: the env id (None: the recipe's default; ignored when resuming, where an
            ``env`` override would be refused as a structural change).
        overrides: field -> value, strings as typed after ``key=`` or typed values.
        saved: a resumed run's ``config.json`` (a dict); its config is the starting point
            and the guards below apply.
        typed: field -> how the user wrote it (``"--frames -5"``), for error messages;
            by default ``key=value``.
        distributed: the run trains through Scheme workers, whose restored optimizers
            cannot take a new learning rate.

    Raises:
        ValueError: an unknown field, a value of the wrong type or out of range, or (when
            resuming) a change to the networks, the env, the buffer or, with
            ``distributed``, a learning rate.
    """
    overrides = dict(overrides or {})
    typed = {**{k: f"{k}={v}" for k, v in overrides.items()}, **(typed or {})}
    if saved is None:
        cfg = apply_overrides(config_for(recipe, env), overrides, recipe)
        start = None
    else:
        start = saved_config(recipe, saved)
        cfg = apply_overrides(start, overrides, recipe)
    check_ranges(cfg, {k: v for k, v in typed.items() if k in overrides})
    if start is not None:
        _check_resume(start, cfg, typed, distributed)
    if getattr(cfg, "dataset", None):  # offline: saved absolute, so eval/resume work anywhere
        cfg = dataclasses.replace(cfg, dataset=str(Path(cfg.dataset).resolve()))
    return dataclasses.replace(cfg, target=resolve_target(recipe, cfg, overrides, saved))


def resolve_target(recipe: Recipe, cfg, overrides: dict, saved: dict | None):
    """The return the run stops at: ``target=X`` (``target=none``: none, the whole budget),
    else the resumed run's (``saved``: its ``config.json``), else the recipe's for the env."""
    if "target" in overrides:
        return cfg.target
    if saved is not None and "target" in saved:  # resolved when the run started
        return cfg.target
    return cfg.target if cfg.target is not None else recipe.targets.get(cfg.env)


def _check_resume(saved, cfg, typed: dict[str, str], distributed: bool) -> None:
    """Refuse overrides that would not load into the saved run's checkpoint."""
    changed = [k for k in STRUCTURAL if hasattr(saved, k) and getattr(saved, k) != getattr(cfg, k)]
    if changed:
        was = ", ".join(f"{k}={getattr(saved, k)!r}" for k in changed)
        raise ValueError(
            f"--resume: {', '.join(typed.get(k, k) for k in changed)} would change the network, "
            f"env or buffer of the saved run (its config.json has {was}), so its checkpoint "
            f"cannot load; drop these overrides, or start a new run with --out."
        )
    if not distributed:
        return
    rates = [k for k in typed if (k == "lr" or k.endswith("_lr")) and hasattr(saved, k)]
    changed = [k for k in rates if getattr(saved, k) != getattr(cfg, k)]
    if changed:
        raise ValueError(
            f"--resume: {', '.join(typed[k] for k in changed)} cannot change a distributed "
            f"(Scheme) run's learning rate: its workers' optimizers are restored as saved. "
            f"Resume without it, or resume without --col-workers/--grad-workers."
        )
