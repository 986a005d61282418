"""TorchRL's parameter API of losses: ``loss.<name>_params`` and ``loss.target_<name>_params``.

TorchRL's scripts build their optimizers from these TensorDicts, e.g.
``Adam(loss.actor_network_params.flatten_keys().values())``. Here the networks keep their
own parameters (they are never moved to a "meta" copy), so these TensorDicts are views of
the very tensors the loss trains: the parameter leaves of ``<name>_params`` *are* the
network's ``nn.Parameter`` objects, and buffer leaves (all of ``target_<name>_params``,
the target copy's) share their buffers' storage. An optimizer built from them trains the loss; an in-place update
of the target TensorDict (``.update_(...)``) updates the target network.

Lazy layers (``nn.LazyLinear``) cannot be copied before they know their shapes, so a loss
that copies a network (a target network, or the copies of an ensemble) checks here first
and says how to materialize them.
"""

from __future__ import annotations

from itertools import chain
from operator import is_

from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams
from torch import nn
from torch.nn.parameter import UninitializedBuffer, UninitializedParameter

from torchrl_lite.objectives.ensemble import Ensemble

_SUFFIX = "_params"
_TARGET = "target_"


def module_params(module: nn.Module, cache: dict | None = None) -> TensorDictBase:
    """The parameters and buffers of ``module`` as a ``TensorDictParams`` (same tensors).

    Building one costs far more than a forward pass of a small network, and custom losses
    read ``self.<name>_params`` at every call; with ``cache`` (a dict, keyed by module) the
    TensorDict is reused while the module still has the same tensor objects
    (``loss.to(...)`` replaces buffers: it is then rebuilt). Parameters are the very
    ``nn.Parameter`` objects; buffers are views sharing their storage.
    """
    if isinstance(module, Ensemble):
        return module.params  # stacked copies, batch [n]
    if cache is None:
        return TensorDictParams(TensorDict.from_module(module), no_convert=True)
    tensors = tuple(chain(module.parameters(), module.buffers()))
    hit = cache.get(id(module))
    if hit is not None and len(hit[0]) == len(tensors) and all(map(is_, hit[0], tensors)):
        return hit[1]
    params = TensorDictParams(TensorDict.from_module(module), no_convert=True)
    cache[id(module)] = (tensors, params)  # kept alive: never mistaken
    return params


def params_attribute(networks, get, name: str, cache: dict) -> TensorDictBase | None:
    """The value of ``loss.<name>`` when it is a ``*_params`` name of a registered network.

    Args:
        networks: the registered network names.
        get: ``getattr`` bound to the loss (reads the networks).
        name: the attribute looked up, e.g. ``"target_value_network_params"``.
        cache: the loss's cache of built TensorDicts (see :func:`module_params`).

    Returns:
        the TensorDict, or None when ``name`` is no such attribute.
    """
    if not name.endswith(_SUFFIX):
        return None
    base = name[: -len(_SUFFIX)]
    if base in networks:
        return module_params(get(base), cache)
    if base.startswith(_TARGET) and base[len(_TARGET) :] in networks:
        target = get(base, None)
        if target is not None:
            return module_params(target, cache)
        # no target network (e.g. delay_value=False): the online values, detached, as TorchRL
        return module_params(get(base[len(_TARGET) :]), cache).detach()
    return None


def check_materialized(owner: str, name: str, module: nn.Module, why: str) -> None:
    """``ValueError`` if ``module`` still has lazy (uninitialized) parameters or buffers.

    Args:
        owner: the loss class name (for the message).
        name: the network's name, e.g. ``"qvalue_network"``.
        module: the network.
        why: what the loss copies it into (``"a target network"``, ``"2 ensemble copies"``).
    """
    lazy = [
        n
        for n, t in (*module.named_parameters(), *module.named_buffers())
        if isinstance(t, (UninitializedParameter, UninitializedBuffer))
    ]
    if lazy:
        raise ValueError(
            f"{owner}: {name} has uninitialized (lazy) parameters {lazy[:3]} (e.g. from "
            f"nn.LazyLinear or MLP(in_features=None)), and the loss copies it into {why}; a "
            f"copy made now would be initialized apart from the network. Run the network "
            f"once on a batch before building the loss, e.g. `{name}(env.reset())` or "
            f"`{name}(env.fake_tensordict())` under torch.no_grad(), or give its layers "
            f"their input sizes."
        )


def check_unshared(owner: str, name: str, module: nn.Module, compare_against) -> None:
    """``ValueError`` if ``module`` (to be copied into an ensemble) shares parameters with
    ``compare_against`` (a module, a TensorDict of parameters or an iterable of tensors)."""
    if isinstance(compare_against, nn.Module):
        others = list(compare_against.parameters())
    elif isinstance(compare_against, TensorDictBase):
        others = list(compare_against.values(True, True))
    else:
        others = list(compare_against)
    ids = {id(t) for t in others}
    shared = [n for n, p in module.named_parameters() if id(p) in ids]
    if shared:
        raise ValueError(
            f"{owner}.convert_to_functional: {name} shares parameters {shared[:3]} with "
            f"compare_against, and expand_dim would make independent copies of them; "
            f"register the shared part as its own network, or drop expand_dim."
        )
