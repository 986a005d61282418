"""The done flags a custom ``_step`` leaves out, filled in (TorchRL's contract).

A seed-era custom env's ``_step`` often writes ``"done"`` only. ``EnvBase.__init__`` sets
a ``_StepProbe`` as the instance's ``_step``: at the first call it runs the class's
``_step``, looks at the result once and either removes itself (the env writes every
flag: no cost on later steps) or leaves a ``_FlagFiller`` that adds ``terminated =
done`` and ``truncated = False`` (or ``done = terminated | truncated``) to every step.
Everything that steps an env (``step``, ``rollout``, batched envs, collectors) calls
``env._step``, so all of them see the flags. The helpers hold the env weakly: the env
holds them, and must stay collectable without the cycle collector.
"""

from __future__ import annotations

import weakref

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K


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
