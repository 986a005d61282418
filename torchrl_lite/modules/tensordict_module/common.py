"""``SafeModule`` and ``SafeSequential``: TensorDict modules with an output spec.

Both are tensordict's ``TensorDictModule`` / ``TensorDictSequential`` with two additions:
an optional ``spec`` (a ``Composite`` keyed by output key) that ``safe=True`` uses to
project the outputs into their domain, and a ``KeyError`` naming the missing input, the
module, the keys present and the closest match when an input is absent. The check costs
nothing on the hot path: it runs only after a call has failed.
"""

from __future__ import annotations

import inspect

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, TensorDictModuleBase, TensorDictSequential, dispatch

from torchrl_lite import _td
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Composite, TensorSpec

__all__ = ["SafeModule", "SafeSequential"]

# the undecorated forward functions: our subclasses re-apply the decorators once
_TDM_FORWARD = inspect.unwrap(TensorDictModule.forward)
_TDS_FORWARD = inspect.unwrap(TensorDictSequential.forward)


class _MissingKeyError(KeyError):
    """A ``KeyError`` whose message already names the module and the missing key."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


def _describe_module(module) -> str:
    """``SafeModule(Linear)`` for a wrapped callable, the class name otherwise."""
    inner = getattr(module, "module", None) if isinstance(module, TensorDictModule) else None
    if inner is None or isinstance(inner, TensorDictModuleBase):
        return type(module).__name__
    return f"{type(module).__name__}({type(inner).__name__})"


def missing_input_error(module, tensordict: TensorDictBase, in_keys=None) -> KeyError | None:
    """The ``KeyError`` for the first of ``in_keys`` absent from ``tensordict``, or None.

    Args:
        module: the module that reads the keys (named in the message).
        tensordict: the input of the call.
        in_keys: the keys to look for; ``module.in_keys`` by default.

    Example:
        >>> from tensordict import TensorDict
        >>> mod = SafeModule(torch.nn.Identity(), in_keys=["obs"], out_keys=["out"])
        >>> err = missing_input_error(mod, TensorDict(observations=torch.zeros(3)))
        >>> print(err)  # doctest: +NORMALIZE_WHITESPACE
        SafeModule(Identity) reads 'obs', which the input lacks. Key 'obs' not found.
        Available keys: ['observations']. The module's in_keys: ['obs'].
    """
    in_keys = module.in_keys if in_keys is None else in_keys
    present = tensordict.keys(include_nested=True)
    for key in in_keys:
        if key not in present:
            return _missing_error(module, key, list(tensordict.keys(True, True)), in_keys)
    return None


def _missing_error(module, key, available, in_keys) -> KeyError:
    return _MissingKeyError(
        f"{_describe_module(module)} reads {key!r}, which the input lacks. "
        f"{missing_key_message(key, available)} The module's in_keys: {list(in_keys)}."
    )


class _InputShapeError(ValueError):
    """An input whose last dimension the module's first layer does not take."""


def input_shape_error(module, tensordict: TensorDictBase, err: Exception) -> ValueError | None:
    """For torch's ``mat1 and mat2 shapes cannot be multiplied``: a ``ValueError`` naming
    the module, its in_keys, the shapes it got and the features its first layer takes;
    None for any other error."""
    if isinstance(err, _InputShapeError):
        return err
    if not isinstance(err, RuntimeError) or "shapes cannot be multiplied" not in str(err):
        return None
    layers = module.modules() if isinstance(module, torch.nn.Module) else ()
    first = next((m for m in layers if isinstance(m, torch.nn.Linear)), None)
    shapes = ", ".join(
        f"{key!r} {list(tensordict.get(key).shape)}"
        for key in module.in_keys
        if tensordict.get(key, None) is not None
    )
    takes = (
        f"its first layer {first} takes {first.in_features} features in the last dimension"
        if first is not None and not isinstance(first, torch.nn.LazyLinear)
        else "its layers take another size"
    )
    return _InputShapeError(
        f"{_describe_module(module)} (in_keys {list(module.in_keys)}) got {shapes}, but "
        f"{takes} (torch: {err}). Build the network for the input's size, or check the "
        "entry it reads (e.g. a transform that changed it)."
    )


def sequence_shape_error(sequence, tensordict: TensorDictBase, err: Exception):
    """:func:`input_shape_error` for the module of ``sequence`` whose first layer does not
    take the width of its input (prefixed with its place), or None."""
    if not isinstance(err, RuntimeError) or "shapes cannot be multiplied" not in str(err):
        return None
    for index, module in enumerate(_td.module_iter(sequence)):
        layers = module.modules() if isinstance(module, torch.nn.Module) else ()
        first = next((m for m in layers if isinstance(m, torch.nn.Linear)), None)
        value = next((tensordict.get(k, None) for k in module.in_keys), None)
        if first is not None and value is not None and value.shape[-1:] != (first.in_features,):
            return _in_sequence(input_shape_error(module, tensordict, err), index, sequence)
    return None


def _checks_own_inputs(module) -> bool:
    return getattr(module, "_checks_own_inputs", False)


def sequence_missing_input_error(sequence, tensordict: TensorDictBase) -> KeyError | None:
    """The ``KeyError`` for the first module of ``sequence`` whose input is missing, or None.

    The keys each module may read are those of ``tensordict`` plus the ``out_keys`` of
    the modules before it. Modules that raise their own missing-key errors are skipped.
    """
    available = list(tensordict.keys(True, True))
    seen = set(tensordict.keys(include_nested=True))
    for index, module in enumerate(_td.module_iter(sequence)):
        if not _checks_own_inputs(module):
            for key in module.in_keys:
                if key not in seen:
                    return _in_sequence(
                        _missing_error(module, key, available, module.in_keys), index, sequence
                    )
        for key in module.out_keys:
            if key not in seen:
                seen.add(key)
                available.append(key)
    return None


def _in_sequence(err: Exception, index: int, sequence) -> Exception:
    err.args = (f"module {index} of {type(sequence).__name__}: {err.args[0]}",)
    return err


def call_checked(sequence, index: int, module, tensordict: TensorDictBase, **kwargs):
    """``module(tensordict)``; a failure caused by a missing input of a plain tensordict
    module becomes a ``KeyError`` naming it and its place in ``sequence``."""
    try:
        return module(tensordict, **kwargs)
    except (_MissingKeyError, _InputShapeError):
        raise
    except Exception as err:
        if _checks_own_inputs(module):
            raise
        shape = input_shape_error(module, tensordict, err)
        if shape is not None:
            raise _in_sequence(shape, index, sequence) from None
        missing = missing_input_error(module, tensordict)
        if missing is None:
            raise
        raise _in_sequence(missing, index, sequence) from None


def run_modules(sequence, modules, tensordict: TensorDictBase) -> TensorDictBase:
    """Call ``modules`` in order on ``tensordict`` (in place), with ``call_checked``."""
    for index, module in enumerate(modules):
        tensordict = call_checked(sequence, index, module, tensordict)
    return tensordict


def as_composite(spec, out_keys, owner: str) -> Composite | None:
    """``spec`` as a ``Composite`` keyed by output key (a leaf spec goes to ``out_keys[0]``).

    Raises ``ValueError`` when a leaf spec is given for several outputs or a
    ``Composite`` names keys the module does not write.
    """
    if spec is None:
        return None
    out_keys = [k for k in out_keys if k != "_"]
    if isinstance(spec, TensorSpec):
        if len(out_keys) != 1:
            raise ValueError(
                f"{owner}: a single {type(spec).__name__} was given as spec but the module "
                f"writes {out_keys}; pass a Composite keyed by output key instead."
            )
        return Composite({out_keys[0]: spec})
    if not isinstance(spec, Composite):
        raise TypeError(
            f"{owner}: spec must be a TensorSpec or a Composite, got {type(spec).__name__}."
        )
    extra = [k for k in spec.keys(True, True) if k not in out_keys]
    if extra:
        raise ValueError(
            f"{owner}: the spec has keys {extra} that the module does not write "
            f"(out_keys={out_keys})."
        )
    return spec


class _SpecMixin:
    """A ``spec`` attribute (a ``Composite``) and the projection ``safe=True`` applies."""

    _project_items: list = []
    _checks_own_inputs = True  # raises its own missing-key errors

    def _set_spec(self, spec, safe: bool, out_keys) -> None:
        owner = type(self).__name__
        spec = as_composite(spec, out_keys, owner)
        if safe and spec is None:
            raise ValueError(
                f"{owner}: safe=True projects the outputs into their spec, but spec is None. "
                "Pass spec=... (e.g. env.action_spec) or set safe=False."
            )
        self._spec = spec
        self.safe = safe
        self._project_items = list(spec.items(True, True)) if safe else []

    @property
    def spec(self) -> Composite | None:
        """The output spec, a ``Composite`` keyed by output key (or None)."""
        return self._spec

    def _project(self, tensordict: TensorDictBase) -> None:
        for i, (key, spec) in enumerate(self._project_items):
            value = tensordict.get(key, None)
            if value is None:
                continue
            if spec.device != value.device:  # move the spec once, with the module's outputs
                spec = spec.to(value.device)
                self._project_items[i] = (key, spec)
            tensordict.set(key, spec.project(value))


class SafeModule(_SpecMixin, TensorDictModule):
    """A ``TensorDictModule`` with an output spec, and outputs projected into it if ``safe``.

    With ``safe=True`` every output named in ``spec`` is projected into it after the call
    (``spec.project``: clamped into bounds, rounded for integers, arg-maxed for one-hot).
    With ``safe=False`` (the default) the outputs are written unchanged, even outside the
    spec; the spec is then only information for other components (exploration, losses).
    An input key missing from the TensorDict raises a ``KeyError`` naming it, the module,
    the keys present and the closest match.

    Args:
        module: the callable (usually an ``nn.Module``) that maps the inputs to outputs.
        in_keys: the entries read, passed positionally to ``module``.
        out_keys: the entries written, one per output of ``module``.
        spec: a ``TensorSpec`` for a single output, or a ``Composite`` keyed by output key.
        safe: project the outputs into ``spec`` (requires a spec).
        **kwargs: passed to ``TensorDictModule`` (``inplace``, ``method``, ``strict``;
            ``strict`` defaults to True here: a missing input raises at once).

    Example:
        >>> from tensordict import TensorDict
        >>> from torchrl_lite.data import Bounded
        >>> mod = SafeModule(torch.nn.Linear(3, 1), in_keys=["observation"],
        ...     out_keys=["action"], spec=Bounded(-1.0, 1.0, shape=(1,)), safe=True)
        >>> td = mod(TensorDict(observation=torch.full((4, 3), 100.0), batch_size=[4]))
        >>> bool(td["action"].abs().max() <= 1.0)
        True
    """

    def __init__(self, module, in_keys, out_keys, spec=None, safe: bool = False, **kwargs):
        kwargs.setdefault("strict", True)
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, **kwargs)
        self._set_spec(spec, safe, self.out_keys)

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase, *args, tensordict_out=None, **kwargs):
        try:
            out = _TDM_FORWARD(self, tensordict, *args, tensordict_out=tensordict_out, **kwargs)
        except Exception as err:
            missing = (
                None if isinstance(err, _MissingKeyError) else missing_input_error(self, tensordict)
            )
            if missing is None:
                missing = input_shape_error(self, tensordict, err)
            if missing is None or missing is err:
                raise
            raise missing from None
        if self._project_items:
            self._project(out)
        return out


class SafeSequential(_SpecMixin, TensorDictSequential):
    """A ``TensorDictSequential`` whose missing inputs raise a ``KeyError`` naming the module.

    ``spec`` gathers the specs of the modules it holds (a ``Composite``, or None).

    Args:
        *modules: TensorDict modules run in order on the same TensorDict.
        partial_tolerant: skip a module whose inputs are missing instead of raising.

    Example:
        >>> from tensordict import TensorDict
        >>> seq = SafeSequential(
        ...     SafeModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"]),
        ...     SafeModule(torch.nn.Linear(4, 1), in_keys=["hidden"], out_keys=["value"]))
        >>> seq(TensorDict(observation=torch.zeros(2, 3), batch_size=[2]))["value"].shape
        torch.Size([2, 1])
    """

    def __init__(self, *modules, partial_tolerant: bool = False):
        super().__init__(*modules, partial_tolerant=partial_tolerant)
        self._spec, self.safe = None, False

    @property
    def spec(self) -> Composite | None:
        """The specs of the modules held, merged (later modules win), or None."""
        return merged_spec(_td.module_iter(self))

    def _plain_call(self, tensordict_out, kwargs) -> bool:
        """True for the common call: in place, no options (run the modules directly)."""
        return (
            tensordict_out is None
            and not kwargs
            and self.inplace is None
            and not self.partial_tolerant
            and not self._select_before_return
        )

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(self, tensordict: TensorDictBase, tensordict_out=None, **kwargs):
        if self._plain_call(tensordict_out, kwargs):
            return run_modules(self, _td.module_iter(self), tensordict)
        try:
            return _TDS_FORWARD(self, tensordict, tensordict_out, **kwargs)
        except Exception as err:
            missing = (
                None
                if isinstance(err, _MissingKeyError)
                else sequence_missing_input_error(self, tensordict)
            )
            if missing is None:
                raise
            raise missing from None


def merged_spec(modules) -> Composite | None:
    """A ``Composite`` with the ``spec`` entries of ``modules`` (later ones win), or None."""
    merged = None
    for module in modules:
        spec = getattr(module, "spec", None)
        if isinstance(spec, Composite):
            merged = Composite({}) if merged is None else merged
            for key, leaf in spec.items(True, True):
                merged[key] = leaf
    return merged
