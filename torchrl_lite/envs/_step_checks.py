"""What ``EnvBase`` checks and completes around a ``_step``: its first output against the
specs, the done flags it leaves out, and the arguments of ``reset`` and ``rollout``.

A user's ``_step`` that returns a reward of shape ``[T]`` where the spec says ``[1]``, a
float ``done``, or a float64 observation for a float32 spec would otherwise flow into
rollouts and buffers as data. ``EnvBase.step`` (once per rollout with the default
``spec_check="first"``) and the collectors (once) call :func:`check_step_output`, which
raises naming the entry, the value and the spec.

A seed-era custom env's ``_step`` often writes ``"done"`` only (TorchRL fills the rest).
``EnvBase.__init__`` sets a ``_StepProbe`` as the instance's ``_step``: at the first call
it runs the class's ``_step``, looks at the result once and either removes itself (the
env writes every flag: no cost on later steps) or leaves a ``_FlagFiller`` that adds
``terminated = done`` and ``truncated = False`` (or ``done = terminated | truncated``) to
every step. Everything that steps an env (``step``, ``rollout``, batched envs,
collectors) calls ``env._step``, so all of them see the flags. The helpers hold the env
weakly: the env holds them, and must stay collectable without the cycle collector.
"""

from __future__ import annotations

import weakref

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data._spec_stack import StackedComposite, copies_of

__all__ = ["check_step_output", "check_rollout_args", "check_reset_input", "class_step"]


def check_step_output(env, next_td: TensorDictBase) -> None:
    """Check every reward, done and observation entry of ``next_td`` against ``env``'s specs.

    Args:
        env: the env whose ``_step`` produced ``next_td``.
        next_td: what ``_step`` returned (the ``"next"`` entries).

    Raises:
        KeyError: an entry of the specs is missing.
        ValueError: an entry's shape or dtype differs from its spec.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> env = PendulumEnv(seed=0)
        >>> td = env.rand_action(env.reset())
        >>> check_step_output(env, env._step(td))  # PendulumEnv's step fits its specs
    """
    if not isinstance(next_td, TensorDictBase):
        raise TypeError(
            f"{type(env).__name__}._step must return a TensorDict, got {type(next_td).__name__}."
        )
    batch = len(env.batch_size)
    for role, specs in (
        ("reward", env.full_reward_spec),
        ("done", env.full_done_spec),
        ("observation", env.full_observation_spec),
    ):
        if isinstance(specs, StackedComposite):  # copies of different specs: each its own
            rows = copies_of(next_td, len(specs.specs))
            for i, (spec, row) in enumerate(zip(specs.specs, rows)):
                _check_entries(env, role, spec, row, batch - 1, f" (copy {i})")
        else:
            _check_entries(env, role, specs, next_td, batch, "")


def _check_entries(env, role: str, specs, next_td: TensorDictBase, batch: int, copy: str):
    for key, spec in specs.items(True, True):
        value = next_td.get(key, None)
        if value is None:
            raise KeyError(
                f"{type(env).__name__}._step returned no {role} entry {key!r}{copy} (its "
                f"spec: {spec}). " + missing_key_message(key, next_td.keys(True, True))
            )
        if not isinstance(value, torch.Tensor):
            continue  # non-tensor entries are not described by tensor specs
        expected = spec.shape if env.batch_locked else spec.shape[batch:]
        got = value.shape if env.batch_locked else value.shape[value.ndim - len(expected) :]
        if got != expected or (not env.batch_locked and value.ndim < len(expected)):
            raise ValueError(
                f"{type(env).__name__}._step returned {role} {key!r}{copy} of shape "
                f"{list(value.shape)}, but its spec has shape {list(spec.shape)} ({spec}); "
                f"return it shaped like the spec (e.g. a reward of shape [*batch, 1])."
            )
        if value.dtype != spec.dtype:
            raise ValueError(
                f"{type(env).__name__}._step returned {role} {key!r}{copy} of dtype "
                f"{value.dtype}, but its spec has dtype {spec.dtype} ({spec}); convert it "
                f"(e.g. .to({spec.dtype})) or change the spec."
            )


def check_rollout_args(max_steps, policy, callback) -> None:
    """``rollout``'s arguments, checked once per call (not per step)."""
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"rollout needs max_steps >= 1 (an int), got {max_steps!r}")
    for name, fn, use in (
        ("policy", policy, "TensorDict -> TensorDict, or None for random actions"),
        ("callback", callback, "called as callback(env, tensordict), or None"),
    ):
        if fn is not None and not callable(fn):
            raise TypeError(f"rollout: {name} must be a callable ({use}), got {fn!r}.")


def check_reset_input(env, tensordict: TensorDictBase) -> None:
    """Raise when the tensordict given to ``reset`` of a batch-locked env is not of the
    env's batch size."""
    if tensordict.batch_size != env.batch_size:
        raise ValueError(
            f"{type(env).__name__}.reset: the tensordict has batch size "
            f"{list(tensordict.batch_size)} but the env has {list(env.batch_size)}; pass one "
            "of the env's batch size (or none)."
        )


# -- the done flags a _step leaves out ----------------------------------------------------
def _class_hook(cls: type):
    """The class's own ``_step`` as stored on the class (a function, a ``staticmethod``),
    skipping the instance attribute the probe sets."""
    for klass in cls.__mro__:
        if "_step" in klass.__dict__:
            return klass.__dict__["_step"]
    raise AttributeError(f"{cls.__name__} has no _step")


def _bind(hook, env):
    """``hook`` bound as an attribute lookup binds it: a plain method to ``env``; a
    ``staticmethod`` (a module-level ``_step(tensordict)`` set on the class, as TorchRL's
    pendulum tutorial does) stays unbound, so it gets the TensorDict only."""
    return hook.__get__(env, type(env)) if hasattr(hook, "__get__") else hook


def class_step(env):
    """The env class's own ``_step``, bound (see ``_bind``)."""
    return _bind(_class_hook(type(env)), env)


class _StepProbe:
    """An env's ``_step`` until its first call: an instance attribute shadowing the
    class's method. It runs the real ``_step`` and looks at the result once: when done
    flags the done spec declares are missing, it fills them and leaves a ``_FlagFiller``
    in its place; otherwise it removes itself (no cost on later steps). Everything that
    steps an env (``step``, ``rollout``, batched envs, collectors) calls ``env._step``."""

    __slots__ = ("env", "after")

    def __init__(self, env):
        # a weak reference: the env holds the probe, and must stay collectable without
        # the cycle collector (a dropped ParallelEnv stops its workers at once)
        self.env, self.after = weakref.ref(env), None

    def __reduce__(self):  # a copy of the env (deepcopy, pickle) gets its own probe
        return _StepProbe, (self.env(),)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.after is not None:  # a caller kept a reference to the probe (a collector batch)
            return self.after(tensordict)
        env = self.env()
        out = class_step(env)(tensordict)
        declared = {k for k in env.full_done_spec.keys() if isinstance(k, str)}
        missing = tuple(k for k in K.DONE_KEYS if k in declared and out.get(k, None) is None)
        if missing:
            self.after = filler = _FlagFiller(env, missing)
            out = filler.fill(out)
        else:
            self.after = _ClassStep(env)
        if env.__dict__.get("_step") is self:
            if missing:
                env.__dict__["_step"] = self.after
            else:
                del env.__dict__["_step"]
        return out


class _ClassStep:
    """The class's ``_step`` of an env, held weakly (for callers that kept the probe)."""

    __slots__ = ("env", "hook")

    def __init__(self, env):
        self.env, self.hook = weakref.ref(env), _class_hook(type(env))

    def __reduce__(self):
        return _ClassStep, (self.env(),)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        return _bind(self.hook, self.env())(tensordict)


class _FlagFiller:
    """``_step`` plus the done flags it leaves out (``terminated = done``,
    ``truncated = False``, or ``done = terminated | truncated``)."""

    __slots__ = ("env", "hook", "missing")

    def __init__(self, env, missing: tuple):
        self.env, self.hook, self.missing = weakref.ref(env), _class_hook(type(env)), missing

    def __reduce__(self):
        return _FlagFiller, (self.env(), self.missing)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self.fill(_bind(self.hook, self.env())(tensordict))

    def fill(self, out: TensorDictBase) -> TensorDictBase:
        missing = self.missing
        if K.DONE in missing:
            term, trunc = out.get(K.TERMINATED, None), out.get(K.TRUNCATED, None)
            if term is None and trunc is None:
                raise KeyError(
                    "_step returned none of 'done', 'terminated', 'truncated'; it must write "
                    f"at least 'done'. Returned keys: {list(out.keys(True, True))}"
                )
            done = term if trunc is None else (trunc if term is None else term | trunc)
            out.set(K.DONE, done.clone())
        done = out.get(K.DONE)
        if K.TERMINATED in missing:
            out.set(K.TERMINATED, done.clone())
        if K.TRUNCATED in missing:
            out.set(K.TRUNCATED, torch.zeros_like(done))
        return out
