"""The base of every loss: configurable keys, value estimators and target networks.

The contract a loss subclass follows
------------------------------------
A loss is an ``nn.Module``; ``forward(tensordict)`` returns a ``TensorDict`` with
``batch_size=[]`` whose ``loss_*`` entries are scalar terms the user sums and
backpropagates, and whose other entries are detached diagnostics (entropy, KL, ...).
A subclass:

1. declares the keys it reads and writes as a dataclass ``_AcceptedKeys`` (field name ->
   default key); users rename them with ``loss.set_keys(name=key)`` and the loss reads
   ``self.tensor_keys.<name>``.
2. calls ``super().__init__()``, then ``self.register_network("value_network", net,
   create_target=delay_value)``: ``self.value_network`` is trained; the target copy
   ``self.target_value_network`` holds its parameters as buffers (moved by ``loss.to``,
   saved in ``state_dict()``, never in ``loss.parameters()``) and ``SoftUpdate`` /
   ``HardUpdate`` update it in place. ``num_copies=n`` registers an
   :class:`~torchrl_lite.objectives.ensemble.Ensemble` of ``n`` independently initialised
   copies called as one (output ``[n, *B]``), e.g. SAC's Q-networks.
3. sets ``default_value_estimator`` (a ``ValueEstimators`` member) and overrides
   ``_value_estimator_network()`` (default None: the loss passes ``next_value`` to
   ``self.value_estimator.value_estimate``). Constructor hyper-parameters go through
   ``self._set_value_kwargs(gamma=gamma)`` (range-checked); ``self.value_estimator`` is
   built on first use and ``make_value_estimator(ValueEstimators.X, **hp)`` replaces it.
   The estimator's keys follow the loss's keys of the same names.
4. reads batch entries with ``self._get(td, "<field>")`` (``KeyError`` naming the key, the
   loss class and ``set_keys``) and lists them in ``in_keys``; a ``KeyError`` or estimator
   ``ValueError`` inside ``forward`` is re-raised with that context.
5. calls a network that a term must not train (the Q-network in an actor loss) with
   ``self._call_detached("qvalue_network", td)``.

The maths helpers shared by the losses live in ``_loss_maths.py`` (re-exported by
:mod:`torchrl_lite.objectives.utils`).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, fields

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.objectives._params import check_materialized, check_unshared, params_attribute
from torchrl_lite.objectives._tensor_keys import TensorKeysMixin
from torchrl_lite.objectives.ensemble import Ensemble
from torchrl_lite.objectives.value import ValueEstimatorBase, ValueEstimators
from torchrl_lite.objectives.value.advantages import _check_factor
from torchrl_lite.objectives.value.estimators import default_value_kwargs

__all__ = [
    "LossModule",
    "SoftUpdate",
    "HardUpdate",
    "TargetNetUpdater",
    "Ensemble",
    "default_value_kwargs",
]

# loss key names forwarded to the value estimator's keys of the same name
_ESTIMATOR_KEYS = ("advantage", "value_target", "value", "reward", "done", "terminated")


class _LossError(Exception):
    """Marks an error already given the loss's context (not wrapped twice)."""


class _LossKeyError(KeyError, _LossError):
    def __str__(self) -> str:  # KeyError quotes its message; show it as written
        return str(self.args[0])


class _LossValueError(ValueError, _LossError):
    pass


def _next(key) -> tuple:
    return (K.NEXT, *key) if isinstance(key, tuple) else (K.NEXT, key)


class LossModule(TensorKeysMixin, nn.Module):
    """Base class of losses: keys (``set_keys``), value estimators, target networks.

    See the module docstring for the contract subclasses follow. ``loss.parameters()``
    yields each trainable parameter once (a trunk shared by two networks appears once)
    and never a target copy.

    Example:
        >>> from dataclasses import dataclass
        >>> from tensordict.nn import TensorDictModule
        >>> class MSELoss(LossModule):
        ...     @dataclass
        ...     class _AcceptedKeys:
        ...         value: str = "state_value"
        ...         value_target: str = "value_target"
        ...     def __init__(self, value_network):
        ...         super().__init__()
        ...         self.register_network("value_network", value_network, create_target=True)
        ...     def forward(self, td):
        ...         value = self.value_network(td.copy()).get(self.tensor_keys.value)
        ...         loss = (value - self._get(td, "value_target")).pow(2).mean()
        ...         return TensorDict(loss_value=loss)
        >>> loss = MSELoss(TensorDictModule(nn.Linear(3, 1), ["observation"], ["state_value"]))
        >>> len(list(loss.parameters()))  # the target copy is not trained
        2
        >>> td = TensorDict(observation=torch.randn(4, 3), value_target=torch.zeros(4, 1),
        ...     batch_size=[4])
        >>> loss(td)["loss_value"].shape
        torch.Size([])
    """

    @dataclass
    class _AcceptedKeys:
        """Subclasses replace this with their own dataclass of key names."""

    default_value_estimator: ValueEstimators | None = None

    def __init__(self):
        super().__init__()
        self.tensor_keys = self._AcceptedKeys()
        self._value_estimator: ValueEstimatorBase | None = None
        self._value_kwargs: dict = {}
        self._target_pairs: list[tuple[str, str]] = []  # (online name, target name)
        self._networks: list[str] = []  # registered network names (``<name>_params``)
        self._params_cache: dict[str, TensorDictBase] = {}

    # -- keys ------------------------------------------------------------------------
    def _keys_set(self) -> None:
        if self._value_estimator is not None:
            self._forward_keys(self._value_estimator)

    @property
    def in_keys(self) -> list:
        """Every entry the loss reads (subclasses list theirs)."""
        return []

    @property
    def out_keys(self) -> list:
        """The entries of the returned TensorDict (subclasses list theirs)."""
        return []

    def _get(self, tensordict: TensorDictBase, field: str, nested_next: bool = False):
        """``tensordict[self.tensor_keys.<field>]`` (under ``"next"`` if ``nested_next``)."""
        key = getattr(self.tensor_keys, field)
        if nested_next:
            key = _next(key)
        value = tensordict.get(key, None)
        if value is None:
            raise self._missing(tensordict, key, field)
        return value

    def _missing(self, tensordict: TensorDictBase, key, field: str | None) -> KeyError:
        name = type(self).__name__
        available = list(tensordict.keys(include_nested=True, leaves_only=True))
        if field is not None:
            fix = (
                f"{name} reads it as its {field!r} key; if your data stores it under another "
                f"name, call loss.set_keys({field}=<your key>)."
            )
        else:
            fix = (
                f"{name} feeds it to one of its networks; give the batch that entry, or "
                f"build the network with in_keys matching your data."
            )
        return _LossKeyError(f"{name}: {missing_key_message(key, available)} {fix}")

    def _field_of(self, key) -> str | None:
        """The key name (``set_keys`` argument) that maps to ``key``, if any."""
        for f in fields(self.tensor_keys):
            value = getattr(self.tensor_keys, f.name)
            if key == value or key == _next(value):
                return f.name
        return None

    def __call__(self, tensordict: TensorDictBase, *args, **kwargs):
        try:
            return super().__call__(tensordict, *args, **kwargs)
        except _LossError:
            raise
        except KeyError as err:
            present = tensordict.keys(include_nested=True)
            for key in self.in_keys:
                if key not in present:
                    raise self._missing(tensordict, key, self._field_of(key)) from err
            raise
        except ValueError as err:
            if any(isinstance(m, ValueEstimatorBase) for m in _tb_owners(err)):
                raise _LossValueError(
                    f"{type(self).__name__}: its value estimator rejected the batch: {err}"
                ) from err
            raise

    # -- networks and targets --------------------------------------------------------
    def register_network(
        self,
        name: str,
        module: nn.Module,
        *,
        create_target: bool = False,
        num_copies: int | None = None,
    ) -> nn.Module:
        """Set ``self.<name>`` to ``module`` (trained) and optionally its frozen target.

        Args:
            name: attribute name, e.g. ``"actor_network"``.
            module: the network (usually a TensorDict module).
            create_target: also set ``self.target_<name>``: a copy whose parameters are
                buffers (not trained, not in ``parameters()``), updated by
                ``SoftUpdate`` / ``HardUpdate``.
            num_copies: register an :class:`~torchrl_lite.objectives.ensemble.Ensemble` of that many copies of ``module``
                (the first keeps ``module``'s initial values, the others are
                re-initialised) instead of ``module`` itself.

        Returns:
            the registered (online) module.
        """
        if num_copies is not None:
            check_materialized(type(self).__name__, name, module, f"{num_copies} ensemble copies")
            module = Ensemble(module, num_copies)
        if create_target:
            check_materialized(type(self).__name__, name, module, "a target network")
        setattr(self, name, module)
        if name not in self._networks:
            self._networks.append(name)
        if create_target:
            target_name = f"target_{name}"
            setattr(self, target_name, _frozen_copy(module))
            self._target_pairs.append((name, target_name))
        return module

    def convert_to_functional(
        self,
        module: nn.Module,
        module_name: str,
        expand_dim: int | None = None,
        create_target_params: bool = False,
        compare_against=None,
    ) -> None:
        """TorchRL's name for :meth:`register_network`, for custom losses written for it.

        Sets ``self.<module_name>`` and ``self.<module_name>_params`` (the network's own
        parameters, trained by the loss) and, with ``create_target_params``,
        ``self.target_<module_name>_params`` (the target copy's buffers). The network keeps
        its parameters: call it directly, or as in TorchRL under
        ``with self.<module_name>_params.to_module(self.<module_name>):``.

        Args:
            module: the network.
            module_name: the attribute name, e.g. ``"actor_network"``.
            expand_dim: register an ``Ensemble`` of that many copies (called as one,
                output batch ``[expand_dim, *B]``) instead of ``module``.
            create_target_params: also create the target network.
            compare_against: parameters of another network (a module or a TensorDict);
                with ``expand_dim``, sharing any of them raises (the ensemble's copies are
                independent; register the shared trunk as its own network).
        """
        if expand_dim is not None and compare_against is not None:
            check_unshared(type(self).__name__, module_name, module, compare_against)
        self.register_network(
            module_name, module, create_target=create_target_params, num_copies=expand_dim
        )

    def __getattr__(self, name: str):
        if not name.endswith("_params"):  # networks, parameters, buffers: nn.Module's lookup
            return super().__getattr__(name)
        try:
            return super().__getattr__(name)
        except AttributeError:
            params = params_attribute(
                self.__dict__.get("_networks", ()),
                lambda *a: getattr(self, *a),
                name,
                self.__dict__.setdefault("_params_views", {}),
            )
            if params is None:
                raise
            return params

    def target_pairs(self) -> list[tuple[nn.Module, nn.Module]]:
        """``(online, target)`` module pairs, in registration order."""
        return [(getattr(self, a), getattr(self, b)) for a, b in self._target_pairs]

    def _call_detached(self, name: str, tensordict: TensorDictBase) -> TensorDictBase:
        """Call ``self.<name>`` on ``tensordict`` with its parameters detached.

        Gradients flow through the network to its inputs but never reach its parameters
        (e.g. the Q-network in an actor loss).
        """
        module = getattr(self, name)
        if isinstance(module, Ensemble):
            return module(tensordict, params=module.params.detach())
        params = self._params_cache.get(name)
        if params is None or not _same_tensors(params, module):
            params = TensorDict.from_module(module)
            self._params_cache[name] = params
        with params.detach().to_module(module, preserve_module_state=False):
            return module(tensordict)

    # -- value estimators ------------------------------------------------------------
    def _set_value_kwargs(self, **hyperparams) -> None:
        """Store estimator hyper-parameters given to the constructor (None ones skipped);
        ``gamma`` (in (0, 1]) and ``lmbda`` (in [0, 1]) are checked now, not at first use."""
        name = type(self).__name__
        for key, value in hyperparams.items():
            if value is None:
                continue
            if key in ("gamma", "lmbda"):
                value = _check_factor(name, key, value, low_open=key == "gamma")
            self._value_kwargs[key] = value

    def _value_estimator_network(self) -> nn.Module | None:
        """The network the value estimator calls (None: the loss gives ``next_value``)."""
        return None

    @property
    def value_estimator(self) -> ValueEstimatorBase:
        """The value estimator (the default one is built on first use)."""
        if self._value_estimator is None:
            if self.default_value_estimator is None:
                raise RuntimeError(f"{type(self).__name__} has no value estimator.")
            self.make_value_estimator(self.default_value_estimator)
        return self._value_estimator

    def make_value_estimator(self, value_type: ValueEstimators | None = None, **hyperparams):
        """Build the value estimator the loss uses, e.g. ``(ValueEstimators.TD0, gamma=0.9)``.

        Args:
            value_type: a ``ValueEstimators`` member; the loss's default when None.
            **hyperparams: the estimator's arguments (``gamma``, ``lmbda``,
                ``average_gae``, ...). Missing ``gamma``/``lmbda`` come from the loss's
                constructor, else 0.99 / 0.95.

        Returns:
            the loss.
        """
        value_type = self.default_value_estimator if value_type is None else value_type
        if not isinstance(value_type, ValueEstimators):
            raise TypeError(
                f"{type(self).__name__}.make_value_estimator: value_type must be a "
                f"ValueEstimators member ({[v.name for v in ValueEstimators]}), got "
                f"{value_type!r}."
            )
        kwargs = {**default_value_kwargs(value_type), **self._value_kwargs, **hyperparams}
        if value_type not in (ValueEstimators.TDLambda, ValueEstimators.GAE):
            kwargs.pop("lmbda", None)
        kwargs.setdefault("value_network", self._value_estimator_network())
        estimator = value_type.estimator_class(**kwargs)
        self._forward_keys(estimator)
        # not a submodule: its value network is already registered under its own name
        self.__dict__["_value_estimator"] = estimator
        return self

    def _forward_keys(self, estimator: ValueEstimatorBase) -> None:
        names = {f.name for f in fields(self.tensor_keys)}
        estimator.set_keys(
            **{n: getattr(self.tensor_keys, n) for n in _ESTIMATOR_KEYS if n in names}
        )

    def _estimate(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Run the value estimator on ``tensordict`` (writes advantage and value target)."""
        try:
            return self.value_estimator(tensordict)
        except ValueError as err:
            raise _LossValueError(
                f"{type(self).__name__}: its value estimator "
                f"({type(self.value_estimator).__name__}) rejected the batch: {err}"
            ) from err


def _tb_owners(err: BaseException):
    """The ``self`` objects of the frames an exception went through."""
    tb = err.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if owner is not None:
            yield owner
        tb = tb.tb_next


def _same_tensors(params: TensorDictBase, module: nn.Module) -> bool:
    """Whether a cached ``from_module`` TensorDict still holds ``module``'s parameters."""
    for name, p in module.named_parameters():
        key = tuple(name.split("."))
        return params.get(key, None) is p
    return True


# -- target networks ----------------------------------------------------------------
def _frozen_copy(module: nn.Module) -> nn.Module:
    """A deep copy of ``module`` whose parameters are buffers (same names, no grad)."""
    target = copy.deepcopy(module)
    memo: dict[int, torch.Tensor] = {}
    for sub in list(target.modules()):
        for child_name, child in list(sub.named_children()):
            if isinstance(child, TensorDictParams):
                frozen = TensorDictParams(child.data.clone(), no_convert=True)
                setattr(sub, child_name, frozen)
    for sub in target.modules():
        if isinstance(sub, TensorDictParams):
            continue
        for pname, param in list(sub._parameters.items()):
            if param is None:
                continue
            buffer = memo.get(id(param))
            if buffer is None:
                buffer = memo[id(param)] = param.detach().clone()
            del sub._parameters[pname]
            sub.register_buffer(pname, buffer)
    return target


def _matched_tensors(online: nn.Module, target: nn.Module):
    """Lists ``(sources, targets)``: online parameters and float buffers, target buffers."""
    target_buffers = dict(target.named_buffers())
    sources, targets = [], []
    named = list(online.named_parameters()) + [
        (n, b) for n, b in online.named_buffers() if b.is_floating_point()
    ]
    for name, tensor in named:
        dst = target_buffers.get(name)
        if dst is None or dst.shape != tensor.shape:
            raise RuntimeError(
                f"target network has no buffer {name!r} matching the online network "
                f"(shapes or structure differ); was the network changed after the loss "
                f"was built?"
            )
        sources.append(tensor)
        targets.append(dst)
    return sources, targets


def _buffer_owner(module: nn.Module, tensor: torch.Tensor):
    """``(owner, local name, tensor)`` of a buffer of ``module`` (to notice a move)."""
    for sub in module.modules():
        for name, buf in sub._buffers.items():
            if buf is tensor:
                return sub, name, tensor
    raise RuntimeError("target network buffer not found")  # unreachable by construction


class TargetNetUpdater:
    """Base of ``SoftUpdate`` / ``HardUpdate``: the online and target tensors of a loss.

    Subclasses implement ``step()``. The tensor lists are rebuilt automatically after the
    loss is moved (``loss.to(...)`` replaces buffers).

    Args:
        loss_module: a loss built with at least one target network (``delay_value=True``,
            ``delay_actor=True``, ...).
    """

    def __init__(self, loss_module: LossModule):
        if not isinstance(loss_module, LossModule):
            raise TypeError(
                f"{type(self).__name__} needs a LossModule, got {type(loss_module).__name__}."
            )
        if not loss_module._target_pairs:
            raise ValueError(
                f"{type(self).__name__}: {type(loss_module).__name__} has no target network "
                f"to update; build it with delay_value=True (or delay_actor / delay_qvalue)."
            )
        self.loss_module = loss_module
        self._sources: list[torch.Tensor] = []
        self._targets: list[torch.Tensor] = []
        self._probe: list[tuple[nn.Module, str, torch.Tensor]] = []

    def _tensors(self):
        if not self._probe or any(
            m._buffers.get(n) is not t for m, n, t in self._probe
        ):  # first call, or the loss was moved
            sources, targets, probe = [], [], []
            for online, target in self.loss_module.target_pairs():
                s, t = _matched_tensors(online, target)
                sources += s
                targets += t
                probe.append(_buffer_owner(target, t[0]))
            self._sources, self._targets, self._probe = sources, targets, probe
        return self._sources, self._targets

    @torch.no_grad()
    def init_(self) -> None:
        """Copy the online values into the targets."""
        sources, targets = self._tensors()
        torch._foreach_copy_(targets, sources)

    def step(self) -> None:
        raise NotImplementedError


class SoftUpdate(TargetNetUpdater):
    """Polyak averaging of the targets: ``target <- (1 - tau) * target + tau * online``.

    Give exactly one of ``tau`` and ``eps = 1 - tau``. Call ``step()`` after each
    optimizer step.

    Args:
        loss_module: a loss with target networks.
        eps: weight of the old target value, in [0, 1).
        tau: weight of the online value, in (0, 1].

    Example:
        >>> from torchrl_lite.modules import QValueActor
        >>> from torchrl_lite.objectives import DQNLoss
        >>> loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="categorical"), gamma=0.99)
        >>> updater = SoftUpdate(loss, tau=0.005)
        >>> updater.step()
    """

    def __init__(
        self, loss_module: LossModule, *, eps: float | None = None, tau: float | None = None
    ):
        super().__init__(loss_module)
        if (eps is None) == (tau is None):
            raise ValueError("SoftUpdate: give exactly one of eps and tau (tau = 1 - eps).")
        tau = 1.0 - eps if tau is None else tau
        if not 0.0 < tau <= 1.0:
            raise ValueError(f"SoftUpdate: tau must lie in (0, 1] (eps in [0, 1)), got tau={tau}.")
        self.tau = float(tau)

    @torch.no_grad()
    def step(self) -> None:
        """Move every target value a fraction ``tau`` towards its online value."""
        sources, targets = self._tensors()
        torch._foreach_lerp_(targets, sources, self.tau)


class HardUpdate(TargetNetUpdater):
    """Copy the online values into the targets every ``value_network_update_interval`` steps.

    Args:
        loss_module: a loss with target networks.
        value_network_update_interval: number of ``step()`` calls between copies.

    Example:
        >>> from torchrl_lite.modules import QValueActor
        >>> from torchrl_lite.objectives import DQNLoss
        >>> loss = DQNLoss(QValueActor(nn.Linear(4, 2), action_space="categorical"), gamma=0.99)
        >>> updater = HardUpdate(loss, value_network_update_interval=100)
        >>> for _ in range(100):
        ...     updater.step()  # copies on the 100th call
    """

    def __init__(self, loss_module: LossModule, *, value_network_update_interval: int = 1000):
        super().__init__(loss_module)
        if int(value_network_update_interval) < 1:
            raise ValueError(
                f"HardUpdate: value_network_update_interval must be >= 1, got "
                f"{value_network_update_interval}."
            )
        self.value_network_update_interval = int(value_network_update_interval)
        self.counter = 0

    def state_dict(self) -> dict:
        """The update counter (checkpointed with the trainer)."""
        return {"counter": self.counter}

    def load_state_dict(self, state: dict) -> None:
        self.counter = int(state["counter"])

    @torch.no_grad()
    def step(self) -> None:
        """Count a step; copy the online values into the targets every interval."""
        self.counter += 1
        if self.counter % self.value_network_update_interval == 0:
            sources, targets = self._tensors()
            torch._foreach_copy_(targets, sources)
