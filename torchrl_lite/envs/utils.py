"""Env utilities: ``step_mdp`` (move ``"next"`` to the root) and ``check_env_specs``."""

from __future__ import annotations

from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from torch import Tensor

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.data._spec_stack import StackedComposite, copies_of
from torchrl_lite.envs._action_bounds import (  # noqa: F401  (used by the collectors)
    ActionBoundsWarning,
    action_entries,
    check_action_value,
    check_batch_bounds,
)
from torchrl_lite.modules.tensordict_module.random_policy import RandomPolicy  # TorchRL's path

__all__ = ["step_mdp", "check_env_specs", "ActionBoundsWarning", "RandomPolicy"]


def _as_set(keys) -> set:
    if keys is None:
        return set()
    if isinstance(keys, (str, tuple)):
        return {keys}
    return set(keys)


def step_mdp(
    tensordict: TensorDictBase,
    next_tensordict: TensorDictBase | None = None,
    keep_other: bool = True,
    exclude_reward: bool = True,
    exclude_done: bool = False,
    exclude_action: bool = True,
    reward_keys=K.REWARD,
    done_keys=K.DONE_KEYS,
    action_keys=K.ACTION,
) -> TensorDictBase:
    """Return the TensorDict of the next step: the ``"next"`` entries moved to the root.

    The reward (and optionally the done flags) of the step are left out, the action too;
    other root entries (policy outputs, recurrent states) are kept when ``keep_other``.

    Example:
        >>> td = TensorDict({"observation": torch.zeros(3), "action": torch.ones(1),
        ...     "next": {"observation": torch.ones(3), "reward": torch.ones(1)}}, [])
        >>> sorted(step_mdp(td).keys())
        ['observation']
    """
    if (
        next_tensordict is None
        and keep_other
        and exclude_reward
        and not exclude_done
        and exclude_action
        and reward_keys == K.REWARD
        and action_keys == K.ACTION
        and type(tensordict) is TensorDict
    ):
        out = _step_mdp_default(tensordict)
        if out is not None:
            return out
    if type(tensordict) is LazyStackedTensorDict:  # copies of different specs: each alone
        args = (keep_other, exclude_reward, exclude_done, exclude_action)
        keys = (reward_keys, done_keys, action_keys)
        rows = [step_mdp(row, None, *args, *keys) for row in tensordict.tensordicts]
        out = LazyStackedTensorDict(*rows, stack_dim=tensordict.stack_dim)
        return out if next_tensordict is None else next_tensordict.update(out)
    nxt = tensordict.get(K.NEXT)
    if exclude_reward and not exclude_done and reward_keys == K.REWARD:
        drop_next = _DEFAULT_DROP_NEXT  # the common case, without building sets
    else:
        drop_next = (_as_set(reward_keys) if exclude_reward else set()) | (
            _as_set(done_keys) if exclude_done else set()
        )
    # nested TensorDicts are copied (shallow) so that writing into the new root never
    # changes the recorded step
    entries = {
        k: (v.copy() if isinstance(v, TensorDictBase) else v)
        for k, v in nxt.items()
        if k not in drop_next
    }
    if keep_other:
        if exclude_action and action_keys == K.ACTION and drop_next is _DEFAULT_DROP_NEXT:
            drop_root = _DEFAULT_DROP_ROOT
        else:
            drop_root = (
                {K.NEXT, K.RESET} | (_as_set(action_keys) if exclude_action else set()) | drop_next
            )
        for key, value in tensordict.items():
            if key not in entries and key not in drop_root:
                entries[key] = value.copy() if isinstance(value, TensorDictBase) else value
    out = _td.new(entries, nxt.batch_size, nxt.device)
    nested_drop = [k for k in drop_next if isinstance(k, tuple) and len(k) > 1]
    if nested_drop:
        out = out.exclude(*nested_drop)
    if next_tensordict is not None:
        return next_tensordict.update(out)
    return out


_DEFAULT_DROP_NEXT = frozenset({K.REWARD})
_DEFAULT_DROP_ROOT = frozenset({K.NEXT, K.RESET, K.ACTION, K.REWARD})


def _step_mdp_default(tensordict: TensorDict) -> TensorDict | None:
    """``step_mdp`` with its default arguments on plain TensorDicts, read from their dicts
    (it runs every step of a rollout); None when ``"next"`` is not a plain TensorDict."""
    root = _td.entries(tensordict)
    next_td = None if root is None else root.get(K.NEXT)
    nxt = _td.entries(next_td)
    if nxt is None:
        return None
    entries = next_root_entries(root, nxt, _DEFAULT_DROP_NEXT, _DEFAULT_DROP_ROOT)
    return _td.new(entries, next_td.batch_size, next_td.device)


def next_root_entries(root: dict, nxt: dict, drop_next, drop_root) -> dict:
    """The entries of the next step's root: the step's ``"next"`` entries but
    ``drop_next`` (the rewards), then the root's other entries but ``drop_root`` (the
    actions, ``"next"``, ``"_reset"``). Nested TensorDicts are copied (shallow), so that
    writing into the new root never changes the recorded step.

    The one next-to-root step of the library: ``step_mdp``, ``EnvBase.rollout`` and
    ``SyncDataCollector`` all build their next root with it (from the dicts of plain
    TensorDicts, see ``torchrl_lite._td.entries``).

    Example:
        >>> root = {"observation": torch.zeros(3), "action": torch.ones(1)}
        >>> nxt = {"observation": torch.ones(3), "reward": torch.ones(1)}
        >>> sorted(next_root_entries(root, nxt, {"reward"}, {"next", "action"}))
        ['observation']
    """
    # the exact type check first spares the slower isinstance for plain tensors
    entries = {}
    for key, value in nxt.items():
        if key not in drop_next:
            if type(value) is not Tensor and not isinstance(value, Tensor):
                value = value.copy()  # a TensorDict or tensorclass
            entries[key] = value
    for key, value in root.items():
        if key not in entries and key not in drop_root:
            if type(value) is not Tensor and not isinstance(value, Tensor):
                value = value.copy()
            entries[key] = value
    return entries


def check_env_specs(
    env, return_contiguous: bool = True, seed: int | None = None, max_steps: int = 3
) -> None:
    """Run a short random rollout and check every entry against the env's specs.

    Raises ``ValueError`` naming the first key whose presence, shape, dtype or values do
    not match, or a key that the rollout has and no spec declares (or the reverse), or a
    transform the env skips because none of its keys is there.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> check_env_specs(PendulumEnv())
    """
    skipped = env._skipped_transforms()
    if skipped:
        raise ValueError(
            "check_env_specs: transforms are skipped because none of their keys is in the "
            "env they transform: " + "; ".join(reason for _, reason in skipped)
        )
    if seed is not None:
        env.set_seed(seed)
    rollout = env.rollout(max_steps, return_contiguous=return_contiguous, break_when_any_done=False)
    expected_batch = (*env.batch_size, rollout.batch_size[-1])
    if tuple(rollout.batch_size) != tuple(expected_batch):
        raise ValueError(
            f"Rollout batch size {list(rollout.batch_size)} does not match env batch {list(env.batch_size)} + [T]"
        )
    names = ("full_observation_spec", "full_state_spec", "full_done_spec")
    names += ("full_action_spec", "full_reward_spec")
    specs = [getattr(env, name) for name in names]
    fake = env.fake_tensordict()
    if any(isinstance(spec, StackedComposite) for spec in specs):  # copies of different specs
        n = env.batch_size[0]
        rows, fakes = copies_of(rollout, n), copies_of(fake, n)
        for i in range(n):
            _check_rollout([spec[i] for spec in specs], rows[i], fakes[i], f"copy {i}: ")
    else:
        _check_rollout(specs, rollout, fake, "")


def _check_rollout(specs: list, rollout: TensorDictBase, fake: TensorDictBase, copy: str):
    """``check_env_specs``'s checks of one rollout against ``specs`` (observation, state,
    done, action, reward) and of the keys of the env's ``fake_tensordict``."""
    obs, state, done, action, reward = specs
    root_specs = {}
    for spec in (obs, state, done, action):
        root_specs.update(spec.items(True, True))
    next_specs = {}
    for spec in (obs, reward, done):
        next_specs.update(spec.items(True, True))
    expected = dict(root_specs)
    expected.update({(K.NEXT, *_tuple(k)): s for k, s in next_specs.items()})
    got = set(rollout.keys(True, True))
    missing = [k for k in expected if _norm(k) not in {_norm(g) for g in got}]
    extra = [k for k in got if _norm(k) not in {_norm(e) for e in expected}]
    if missing:
        raise ValueError(
            f"check_env_specs: {copy}keys declared in the specs are missing from the rollout: {missing}. Rollout keys: {sorted(map(str, got))}"
        )
    if extra:
        raise ValueError(
            f"check_env_specs: {copy}the rollout has keys no spec declares: {extra}. Declared: {sorted(map(str, expected))}"
        )
    for key, spec in expected.items():
        if spec is None:
            continue
        spec.assert_is_in(rollout.get(key), key=key)
    fake_keys = {_norm(k) for k in fake.keys(True, True)}
    if fake_keys != {_norm(k) for k in expected}:
        raise ValueError(
            f"check_env_specs: {copy}fake_tensordict keys {sorted(map(str, fake_keys))} differ from the spec keys"
        )


class classproperty:
    """A read-only property of the class itself (``GymEnv.available_envs``)."""

    def __init__(self, fget):
        self.fget = fget
        self.__doc__ = fget.__doc__

    def __get__(self, instance, owner):
        return self.fget(owner)


def _tuple(key) -> tuple:
    return key if isinstance(key, tuple) else (key,)


def _norm(key) -> tuple:
    return _tuple(key)


# The exploration switch, importable from here as in TorchRL (defined with the modules).
from torchrl_lite.modules.tensordict_module.exploration import (  # noqa: E402
    ExplorationType,
    exploration_type,
    set_exploration_type,
)

__all__ += ["ExplorationType", "exploration_type", "set_exploration_type"]

set_exploration_mode = set_exploration_type
"""TorchRL v0.4's name: ``set_exploration_mode("random")`` is ``set_exploration_type``."""

__all__ += ["set_exploration_mode"]
