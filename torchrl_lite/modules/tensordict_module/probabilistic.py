"""Probabilistic TensorDict modules: build a distribution from entries, write a sample.

``SafeProbabilisticModule`` is tensordict's ``ProbabilisticTensorDictModule`` with an
output spec, the log-probability written at ``"sample_log_prob"`` (the key every loss
reads), a construction-time check that the entries it reads and its
``distribution_kwargs`` give the distribution every parameter it needs, and the missing
input ``KeyError`` of ``SafeModule``. ``SafeProbabilisticTensorDictSequential`` chains
modules that compute the parameters with one of them, with a fast path for the common
case (a few deterministic modules, then one probabilistic module).
"""

from __future__ import annotations

import inspect

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    dispatch,
)
from tensordict.nn.distributions import CompositeDistribution, Delta
from tensordict.nn.probabilistic import interaction_type  # also there before tensordict 0.11

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.modules.tensordict_module.common import (
    SafeSequential,
    _MissingKeyError,
    _SpecMixin,
    call_checked,
    merged_spec,
    missing_input_error,
    run_modules,
    sequence_missing_input_error,
    sequence_shape_error,
)

__all__ = ["SafeProbabilisticModule", "SafeProbabilisticTensorDictSequential"]

_PTDM_FORWARD = inspect.unwrap(ProbabilisticTensorDictModule.forward)
_PTDS_FORWARD = inspect.unwrap(ProbabilisticTensorDictSequential.forward)


def check_distribution_params(
    distribution_class, dist_keys, distribution_kwargs, owner: str
) -> None:
    """Raise ``ValueError`` if ``dist_keys`` + ``distribution_kwargs`` miss a required
    parameter of ``distribution_class`` or name one it does not accept."""
    if isinstance(distribution_class, type) and issubclass(
        distribution_class, CompositeDistribution
    ):
        return
    try:
        params = inspect.signature(distribution_class).parameters.values()
    except (TypeError, ValueError):  # a builtin or C callable: nothing to check
        return
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    accepted = [p.name for p in params if p.kind in named]
    required = [p.name for p in params if p.kind in named and p.default is inspect.Parameter.empty]
    given_from_keys = [k[-1] if isinstance(k, tuple) else k for k in dist_keys]
    given = set(given_from_keys) | set(distribution_kwargs)
    name = getattr(distribution_class, "__name__", repr(distribution_class))
    missing = [p for p in required if p not in given]
    if missing:
        raise ValueError(
            f"{owner}: {name} needs the parameters {required}, but in_keys "
            f"{list(dist_keys)} and distribution_kwargs {sorted(distribution_kwargs)} do not "
            f"provide {missing}. Add them to in_keys (the module before must write them, "
            f"e.g. with NormalParamExtractor for loc/scale) or to distribution_kwargs."
        )
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        unknown = [k for k in given_from_keys if k not in accepted]
        if unknown:
            raise ValueError(
                f"{owner}: {name} does not accept the parameters {unknown} (from in_keys "
                f"{list(dist_keys)}); it accepts {accepted}. Map entries to parameters "
                f"with a dict, e.g. in_keys={{'loc': 'my_loc'}}."
            )


class SafeProbabilisticModule(_SpecMixin, ProbabilisticTensorDictModule):
    """Build a distribution from ``in_keys`` and write a value from it at ``out_keys``.

    The value follows the exploration type: a sample under ``ExplorationType.RANDOM``,
    the mode / deterministic sample under ``DETERMINISTIC``, ``MODE`` or ``MEAN``
    (``default_interaction_type`` outside any ``set_exploration_type`` block). With
    ``safe=True`` the value is projected into ``spec`` (the log-probability is that of
    the value before projection).

    Args:
        in_keys: the parameters' entries (the last element of each key names the
            parameter: ``["loc", "scale"]``), or a dict ``{param: key}``.
        out_keys: where the value is written. Defaults to ``["action"]``.
        spec: spec of the value (``TensorSpec``) or a ``Composite`` keyed by out key.
        safe: project the value into ``spec``.
        default_interaction_type: the exploration type outside ``set_exploration_type``.
        distribution_class: the distribution (class or callable taking the parameters).
        distribution_kwargs: extra constant keyword arguments of the distribution.
        return_log_prob: also write the value's log-probability at ``log_prob_key``.
        log_prob_key: where the log-probability goes (one out key only).
        n_empirical_estimate: samples averaged for ``MEAN`` when the distribution has
            no closed-form mean.
        num_samples: draw this many values per call (extra leading dims).
        default_interaction_mode: TorchRL v0.4's name of ``default_interaction_type``
            (a string such as ``"random"``); it wins when given.
        cache_dist: accepted for TorchRL's signature (the distribution is rebuilt per call).

    Example:
        >>> from tensordict import TensorDict
        >>> mod = SafeProbabilisticModule(in_keys=["loc", "scale"], out_keys="action",
        ...     distribution_class=torch.distributions.Normal, return_log_prob=True)
        >>> td = mod(TensorDict(loc=torch.zeros(3), scale=torch.ones(3)))
        >>> td["action"], td["sample_log_prob"].shape
        (tensor([0., 0., 0.]), torch.Size([3]))
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        in_keys,
        out_keys=None,
        spec=None,
        safe: bool = False,
        default_interaction_type: InteractionType = InteractionType.DETERMINISTIC,
        distribution_class=Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        log_prob_key=K.SAMPLE_LOG_PROB,
        n_empirical_estimate: int = 1000,
        num_samples=None,
        default_interaction_mode: str | None = None,
        cache_dist: bool = False,
    ):
        if default_interaction_mode is not None:  # TorchRL v0.4's name for the same setting
            default_interaction_type = InteractionType(default_interaction_mode)
        del cache_dist  # distributions are rebuilt on each call; nothing to cache
        out_keys = [K.ACTION] if out_keys is None else out_keys
        out_keys = [out_keys] if isinstance(out_keys, (str, tuple)) else list(out_keys)
        distribution_kwargs = {} if distribution_kwargs is None else distribution_kwargs
        dist_keys = list(in_keys) if isinstance(in_keys, dict) else in_keys
        dist_keys = [dist_keys] if isinstance(dist_keys, (str, tuple)) else list(dist_keys)
        check_distribution_params(
            distribution_class, dist_keys, distribution_kwargs, type(self).__name__
        )
        super().__init__(
            in_keys=in_keys,
            out_keys=out_keys,
            default_interaction_type=default_interaction_type,
            distribution_class=distribution_class,
            distribution_kwargs=distribution_kwargs,
            return_log_prob=return_log_prob,
            log_prob_key=log_prob_key if len(out_keys) == 1 else None,
            n_empirical_estimate=n_empirical_estimate,
            num_samples=num_samples,
        )
        self._set_spec(spec, safe, self._out_keys)
        composite = isinstance(distribution_class, type) and issubclass(
            distribution_class, CompositeDistribution
        )
        # the common case (one sample key, no num_samples / generator) skips the
        # general-purpose bookkeeping of tensordict's forward
        self._fast = not composite and num_samples is None and len(self._out_keys) == 1
        self._params = [
            (d[-1] if isinstance(d, tuple) else d, k) for d, k in zip(self.dist_keys, self.in_keys)
        ]

    def get_dist(self, tensordict: TensorDictBase):
        """The distribution built from the parameters in ``tensordict``."""
        try:
            if self._fast:
                params = {name: tensordict.get(key) for name, key in self._params}
                return self.distribution_class(**params, **self.distribution_kwargs)
            return super().get_dist(tensordict)
        except Exception as err:
            missing = (
                None if isinstance(err, _MissingKeyError) else missing_input_error(self, tensordict)
            )
            if missing is None:
                raise
            raise missing from None

    build_dist_from_params = get_dist

    def _sample_into(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Draw the value (and its log-probability) and write them into ``tensordict``."""
        dist = self.get_dist(tensordict)
        kind = interaction_type() or self.default_interaction_type
        log_prob = None
        if kind is InteractionType.RANDOM:
            # a distribution may score its own draw exactly (e.g. tanh at saturated bounds)
            joint_name = "rsample_and_log_prob" if dist.has_rsample else "sample_and_log_prob"
            joint = getattr(dist, joint_name, None) if self.return_log_prob else None
            if joint is not None:
                sample, log_prob = joint(torch.Size())
            else:
                sample = dist.rsample() if dist.has_rsample else dist.sample()
        else:
            sample = self._dist_sample(dist, kind)
        tensordict.set(self._out_keys[0], sample)
        if self.return_log_prob:
            tensordict.set(
                self._log_prob_key, dist.log_prob(sample) if log_prob is None else log_prob
            )
        return tensordict

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(
        self, tensordict: TensorDictBase, tensordict_out=None, _requires_sample: bool = True
    ):
        if (
            self._fast
            and tensordict_out is None
            and _requires_sample
            and _td.default_sampling(self)
        ):
            out = self._sample_into(tensordict)
        else:
            out = _PTDM_FORWARD(self, tensordict, tensordict_out, _requires_sample)
        if self._project_items:
            self._project(out)
        return out


def _flatten_last(modules: tuple) -> tuple:
    """Splice a last ``ProbabilisticTensorDictSequential`` into its modules.

    tensordict's ``get_dist`` runs every module but the last, then builds the
    distribution of the last one: a nested sequence there would skip its own
    parameter modules. Splicing keeps the same module objects (same parameters).
    """
    if len(modules) == 1 and isinstance(modules[0], (list, tuple)):
        modules = tuple(modules[0])
    if (
        len(modules) > 1
        and isinstance(modules[-1], ProbabilisticTensorDictSequential)
        and not modules[-1].return_composite
    ):
        return (*modules[:-1], *_flatten_last(tuple(_td.module_iter(modules[-1]))))
    return tuple(modules)


class SafeProbabilisticTensorDictSequential(ProbabilisticTensorDictSequential):
    """Modules that compute distribution parameters, then a probabilistic module.

    ``get_dist(td)`` returns the distribution of the last module (losses use it),
    ``log_prob(td)`` the log-probability of the value already in ``td``. A last module
    that is itself such a sequence is spliced in (its modules are used as they are).
    A missing input raises a ``KeyError`` naming the module that reads it.

    Args:
        *modules: TensorDict modules, the last one a ``SafeProbabilisticModule`` (or
            tensordict ``ProbabilisticTensorDictModule``).
        partial_tolerant: skip a module whose inputs are missing instead of raising.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import NormalParamExtractor
        >>> from torchrl_lite.modules import SafeModule
        >>> net = SafeModule(torch.nn.Sequential(torch.nn.Linear(3, 2), NormalParamExtractor()),
        ...     in_keys=["observation"], out_keys=["loc", "scale"])
        >>> policy = SafeProbabilisticTensorDictSequential(net, SafeProbabilisticModule(
        ...     in_keys=["loc", "scale"], out_keys="action",
        ...     distribution_class=torch.distributions.Normal))
        >>> policy(TensorDict(observation=torch.zeros(5, 3), batch_size=[5]))["action"].shape
        torch.Size([5, 1])
    """

    _checks_own_inputs = True  # raises its own missing-key errors

    def __init__(self, *modules, partial_tolerant: bool = False):
        super().__init__(*_flatten_last(modules), partial_tolerant=partial_tolerant)
        self._refresh_fast_path()

    @property
    def spec(self):
        """The specs of the modules held, merged (later modules win), or None."""
        return merged_spec(_td.module_iter(self))

    def _refresh_keys(self) -> None:
        super()._refresh_keys()
        self._refresh_fast_path()

    def _refresh_fast_path(self) -> None:
        """Cache the modules of the common case: deterministic modules, then one sampler."""
        modules = list(_td.module_iter(self))
        det = modules[:-1]
        simple = (
            not self.return_composite
            and isinstance(modules[-1], ProbabilisticTensorDictModule)
            and not any(
                isinstance(m, ProbabilisticTensorDictModule) for d in det for m in d.modules()
            )
        )
        self.__dict__["_fast"] = (det, modules[-1]) if simple else None

    _plain_call = SafeSequential._plain_call

    @dispatch(auto_batch_size=False)
    @_td.skip_existing_none()
    def forward(
        self, tensordict: TensorDictBase, tensordict_out=None, _requires_sample=None, **kwargs
    ):
        fast = self.__dict__.get("_fast")
        if fast is not None and self._plain_call(tensordict_out, kwargs):
            det, last = fast
            tensordict = run_modules(self, det, tensordict)
            requires = self._requires_sample
            if _requires_sample is not None:
                requires = requires and _requires_sample
            return call_checked(self, len(det), last, tensordict, _requires_sample=requires)
        try:
            return _PTDS_FORWARD(self, tensordict, tensordict_out, _requires_sample, **kwargs)
        except Exception as err:
            missing = (
                None
                if isinstance(err, _MissingKeyError)
                else sequence_missing_input_error(self, tensordict)
            )
            if missing is None:
                raise
            raise missing from None

    def get_dist(self, tensordict: TensorDictBase, tensordict_out=None, **kwargs):
        """The distribution of the last module, after running the modules before it."""
        try:
            return super().get_dist(tensordict, tensordict_out, **kwargs)
        except Exception as err:
            missing = (
                None
                if isinstance(err, _MissingKeyError)
                else sequence_missing_input_error(self, tensordict)
            )
            if missing is None:
                missing = sequence_shape_error(self, tensordict, err)
            if missing is None:
                raise
            raise missing from None
