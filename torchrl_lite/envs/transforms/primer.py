"""TensorDictPrimer: declare extra entries (e.g. recurrent states) and fill them at reset.

A recurrent policy reads its hidden state from the TensorDict and writes the next one
under ``("next", key)``. The env knows nothing about it, so this transform:

* adds the entries' specs to the observation spec (root and ``"next"``) and to the state
  spec, expanded to the env's batch, so that ``check_env_specs``, batched envs and
  collectors see them;
* writes ``default_value`` at every reset (only in the sub-envs being reset);
* after each step, writes the entry into the step's output: the policy's
  ``("next", key)`` if it wrote one, else the value at the root (carried over).

Priming the env's action key (``TensorDictPrimer(action=env.action_spec)``) mirrors the
action into the observations: the default value at reset, the action taken after a step.

As in TorchRL, the primed entries are state: a primer may sit inside the copies of a
``SerialEnv``/``ParallelEnv`` (``ParallelEnv(n, lambda: TransformedEnv(env, primer))``),
whose step then sends each copy its entries (and the policy's ``("next", key)``) with the
action; the result is the same as with the primer on the batched env.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Number

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Composite, TensorSpec
from torchrl_lite.envs.transforms.transforms import Transform, _as_tuple, _norm_key

__all__ = ["TensorDictPrimer"]


def _leaf_specs(primers) -> dict:
    if isinstance(primers, Composite):
        return {_norm_key(k): s for k, s in primers.items(True, True)}
    out = {}
    for key, spec in primers.items():
        if isinstance(spec, Composite):
            for sub, leaf in spec.items(True, True):
                out[_norm_key((*_as_tuple(key), *_as_tuple(sub)))] = leaf
        elif isinstance(spec, TensorSpec):
            out[_norm_key(key)] = spec
        else:
            raise TypeError(
                f"TensorDictPrimer: the spec of {key!r} must be a TensorSpec or Composite, "
                f"got {type(spec).__name__}: {spec!r}"
            )
    return out


class TensorDictPrimer(Transform):
    """Add entries with their specs to an env and set them to a default value at reset.

    Args:
        primers: ``{key: spec}`` (or a ``Composite``) of the entries, with the shape of one
            env (the env's batch dims are prepended); keyword arguments add more.
        default_value: the value at reset: a number, a callable ``(spec) -> tensor`` (for
            one env), or a dict of those per key. Default 0.
        reset_key: the partial-reset mask to honour (default ``"_reset"``).
        random: draw the reset value from ``spec.rand()`` instead of ``default_value``.
        expand_specs: prepend the env's batch dims to the specs (default True); with
            False the specs must already start with them.

    Example:
        >>> from torchrl_lite.data import Unbounded
        >>> from torchrl_lite.envs import GymEnv, TransformedEnv
        >>> env = TransformedEnv(GymEnv("Pendulum-v1"), TensorDictPrimer({"hidden": Unbounded((2, 8))}))
        >>> env.reset()["hidden"].shape
        torch.Size([2, 8])
        >>> env.observation_spec["hidden"].shape
        torch.Size([2, 8])
    """

    def __init__(
        self,
        primers: dict | Composite | None = None,
        default_value: float | Callable | dict = 0.0,
        reset_key=None,
        random: bool = False,
        expand_specs: bool = True,
        **kwargs: TensorSpec,
    ):
        super().__init__(in_keys=[], out_keys=[])
        specs = _leaf_specs(primers or {})
        specs.update(_leaf_specs(kwargs))
        if not specs:
            raise ValueError("TensorDictPrimer needs at least one {key: spec} entry.")
        self.primers = specs  # key -> leaf spec of one env
        if isinstance(default_value, dict):
            defaults = {_norm_key(k): v for k, v in default_value.items()}
            unknown = [k for k in defaults if k not in specs]
            if unknown:
                raise KeyError(
                    f"TensorDictPrimer: default_value has keys {unknown} without a spec; "
                    f"the primed keys are {list(specs)}."
                )
            missing = [k for k in specs if k not in defaults]
            if missing and not random:
                raise KeyError(f"TensorDictPrimer: default_value has no entry for {missing}.")
        else:
            defaults = dict.fromkeys(specs, default_value)
        for key, value in defaults.items():
            if not (isinstance(value, Number) or callable(value)):
                raise TypeError(
                    f"TensorDictPrimer: the default value of {key!r} must be a number or a "
                    f"callable, got {type(value).__name__}: {value!r}"
                )
        self.default_value = defaults
        self.reset_key = K.RESET if reset_key is None else _norm_key(reset_key)
        self.random = random
        self.expand_specs = expand_specs
        self._batch = None
        self._device = None
        self._specs = {}  # key -> spec with the env's batch dims
        self._state_specs = {}  # the same, less a primed action key

    # -- specs -------------------------------------------------------------------------
    def _attach(self, specs) -> None:
        batch = tuple(specs.batch_size)
        present = set()
        for composite in (specs.observation, specs.state, specs.reward, specs.done):
            present.update(_as_tuple(k) for k in composite.keys(True, True))
        clash = [k for k in self.primers if _as_tuple(k) in present]
        if clash:
            raise ValueError(
                f"TensorDictPrimer: {clash} already have a spec in the env it transforms; "
                "prime new keys only (or rename them)."
            )
        # A primed action key mirrors the action into the observations (reset: default
        # value; step: the action taken), as TorchRL's Decision Transformer scripts use.
        actions = {_as_tuple(k): s for k, s in specs.action.items(True, True)}
        out = {}
        for key, spec in self.primers.items():
            own = actions.get(_as_tuple(key))
            if own is not None and tuple(spec.shape) == tuple(own.shape):
                pass  # the env's own action spec, batch dims included
            elif self.expand_specs:
                spec = spec.expand(*batch, *spec.shape)
            elif tuple(spec.shape[: len(batch)]) != batch:
                raise ValueError(
                    f"TensorDictPrimer(expand_specs=False): the spec of {key!r} has shape "
                    f"{list(spec.shape)}, which does not start with the env's batch {list(batch)}."
                )
            out[key] = spec.to(specs.device)
        self._specs, self._batch, self._device = out, batch, specs.device
        # the state the env's step reads back (a primed action is already an input)
        self._state_specs = {k: v for k, v in out.items() if _as_tuple(k) not in actions}

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        for key, spec in self._specs.items():
            observation_spec[key] = spec.clone()
        return observation_spec

    def transform_state_spec(self, state_spec: Composite) -> Composite:
        # step() reads the entries back: as state, batched envs pass them to their copies
        for key, spec in self._state_specs.items():
            state_spec[key] = spec.clone()
        return state_spec

    # -- values --------------------------------------------------------------------------
    def _value(self, key, spec: TensorSpec) -> torch.Tensor:
        if self.random:
            return spec.rand()
        default = self.default_value[key]
        if callable(default):
            one = torch.as_tensor(default(self.primers[key]), dtype=spec.dtype)
            return one.to(spec.device).expand(spec.shape).clone()
        return torch.full(spec.shape, default, dtype=spec.dtype, device=spec.device)

    def _reset(self, tensordict, tensordict_reset):
        if self._batch is None:
            raise RuntimeError("TensorDictPrimer only resets inside a TransformedEnv.")
        mask = None if tensordict is None else tensordict.get(self.reset_key, None)
        for key, spec in self._specs.items():
            value = self._value(key, spec)
            old = None if (mask is None or tensordict is None) else tensordict.get(key, None)
            if old is not None and old.shape == value.shape:
                m = mask.reshape(*self._batch, *([1] * (value.dim() - len(self._batch))))
                value = torch.where(m, value, old)
            tensordict_reset.set(key, value)
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        for key in self._specs:
            if key in next_tensordict.keys(True, True):
                continue
            value = tensordict.get((K.NEXT, *_as_tuple(key)), None)
            if value is None:
                value = tensordict.get(key, None)
            if value is None:
                raise KeyError(
                    f"TensorDictPrimer: the step input has neither {key!r} nor "
                    f"{(K.NEXT, *_as_tuple(key))!r}: pass the TensorDict returned by reset() "
                    "(or step_mdp of the last step). "
                    + missing_key_message(key, tensordict.keys(True, True))
                )
            next_tensordict.set(key, value)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Add the missing primed entries (default values) to a standalone TensorDict."""
        batch = tuple(tensordict.batch_size)
        for key, spec in self.primers.items():
            if tensordict.get(key, None) is None:
                full = spec.expand(*batch, *spec.shape).to(tensordict.device or spec.device)
                tensordict.set(key, self._value(key, full))
        return tensordict

    def extra_repr(self) -> str:
        specs = ", ".join(f"{k!r}: {list(s.shape)}" for k, s in self.primers.items())
        return f"primers={{{specs}}}, default_value={self.default_value}"
