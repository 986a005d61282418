"""resolve(): one place for defaults, overrides, ranges and resume guards; the Recipe record."""

import dataclasses

import pytest

from torchrl_lite.recipes import Recipe, get_recipe, resolve
from torchrl_lite.recipes.config import saved_config


def _saved(cfg) -> dict:
    return {"algo": "ppo", "config": dataclasses.asdict(cfg), "target": cfg.target}


def test_recipe_record_states_what_the_module_holds():
    from torchrl_lite.recipes import dqn, iql

    recipe = get_recipe("dqn")
    assert isinstance(recipe, Recipe) and recipe is dqn.RECIPE
    assert (recipe.name, recipe.Config, recipe.targets) == ("dqn", dqn.Config, dqn.TARGETS)
    assert recipe.pixel_defaults == dqn.PIXEL_DEFAULTS and not recipe.offline
    assert get_recipe("iql").offline and get_recipe("iql").make_evaluation is iql.make_evaluation
    assert recipe.make_train_env is dqn.make_train_env  # the module's other builders
    with pytest.raises(AttributeError, match="recipe 'dqn' has no 'make_everything'"):
        recipe.make_everything  # noqa: B018


def test_resolve_applies_family_then_pixel_defaults_once_overrides_win():
    sac = get_recipe("sac")
    plain = sac.Config()
    cfg = resolve(sac, "dm_control/cartpole-swingup", {"pixels": "true", "lr": "5e-4"})
    family = sac.env_defaults["dm_control"]
    expected = {**family, **sac.pixel_defaults, "lr": 5e-4, "pixels": True}
    for key, value in expected.items():
        assert getattr(cfg, key) == value, key
    assert cfg.env == "dm_control/cartpole-swingup" and plain.pixels is False


def test_resolve_refuses_unknown_keys_and_out_of_range_values():
    ppo = get_recipe("ppo")
    with pytest.raises(ValueError, match="Unknown option 'lrr'.*Did you mean 'lr'"):
        resolve(ppo, None, {"lrr": "1e-3"})
    with pytest.raises(ValueError, match=r"--frames -5: the frame budget must be >= 1, got -5"):
        resolve(ppo, None, {"frames": -5}, typed={"frames": "--frames -5"})
    with pytest.raises(ValueError, match=r"gamma=2: the discount gamma must be in \[0, 1\]"):
        resolve(ppo, None, {"gamma": "2"})


def test_resolve_sets_the_target_in_force():
    ppo = get_recipe("ppo")
    assert resolve(ppo, "Pendulum-v1").target == ppo.targets["Pendulum-v1"] == -200.0
    assert resolve(ppo, "Pendulum-v1", {"target": "none"}).target is None
    assert resolve(ppo, "CartPole-v1").target is None  # no target for that env
    saved = _saved(dataclasses.replace(ppo.Config(), target=None))
    assert resolve(ppo, None, {}, saved).target is None  # a resumed run keeps its own


def test_resolve_resume_guards():
    ppo = get_recipe("ppo")
    saved = _saved(resolve(ppo, "Pendulum-v1"))
    assert saved_config(ppo, saved) == resolve(ppo, "Pendulum-v1")
    assert resolve(ppo, None, {"frames": "99999"}, saved).frames == 99999
    with pytest.raises(ValueError, match=r"--resume: hidden=8 would change the network.*hidden=64"):
        resolve(ppo, None, {"hidden": "8"}, saved)
    assert resolve(ppo, None, {"lr": "1e-5"}, saved).lr == 1e-5  # a Trainer run may
    with pytest.raises(ValueError, match="lr=1e-5 cannot change a distributed"):
        resolve(ppo, None, {"lr": "1e-5"}, saved, distributed=True)
