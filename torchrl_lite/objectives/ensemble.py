"""``Ensemble``: ``n`` copies of a TensorDict module with stacked parameters, called as one
(the Q-networks of SAC, REDQ, TD3, ...). Registered by ``LossModule.register_network(...,
num_copies=n)``."""

from __future__ import annotations

import copy

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictParams
from torch import nn

__all__ = ["Ensemble"]


class Ensemble(nn.Module):
    """``n`` copies of a TensorDict module, their parameters stacked, called as one.

    The parameters of the copies are stacked (a ``TensorDictParams`` of batch ``[n]``,
    ``ensemble.params``); ``forward(td)`` returns a TensorDict of batch
    ``[n, *td.batch_size]``. A TensorDict module around an ``nn.Linear`` or an
    :class:`~torchrl_lite.modules.MLP` of linear layers and elementwise activations (the
    usual Q-network) runs fused: one batched matrix product per layer for all copies
    (``torch.baddbmm``), with no per-copy module call. Any other module runs under
    ``torch.vmap`` on accelerators (one batched kernel per layer) and, on CPU, one copy
    after the other on slices of the stacked parameters, which is faster there. The first
    copy keeps ``module``'s values; the others are re-initialised with each sub-module's
    ``reset_parameters()``.

    Args:
        module: the TensorDict module to copy (its buffers become stacked parameters too).
        num_copies: the number of copies ``n``.
        vectorized: force ``torch.vmap`` (True) or the loop (False); None picks the fused
            path where the module allows it, else by device.

    Example:
        >>> from tensordict.nn import TensorDictModule
        >>> q = TensorDictModule(nn.Linear(4, 1), ["obs_act"], ["state_action_value"])
        >>> ens = Ensemble(q, 2)
        >>> ens(TensorDict(obs_act=torch.randn(5, 4), batch_size=[5]))["state_action_value"].shape
        torch.Size([2, 5, 1])
    """

    def __init__(self, module: nn.Module, num_copies: int, vectorized: bool | None = None):
        super().__init__()
        if int(num_copies) < 1:
            raise ValueError(f"Ensemble: num_copies must be >= 1, got {num_copies}.")
        copies = [TensorDict.from_module(module).data.clone()]
        for _ in range(int(num_copies) - 1):
            fresh = copy.deepcopy(module)
            for sub in fresh.modules():
                if hasattr(sub, "reset_parameters"):
                    sub.reset_parameters()
            copies.append(TensorDict.from_module(fresh).data.clone())
        self.params = TensorDictParams(torch.stack(copies).contiguous())
        self.__dict__["module"] = module  # the template: not a submodule (no own params)
        self.in_keys = list(getattr(module, "in_keys", []))
        self.out_keys = list(getattr(module, "out_keys", []))
        self.num_copies = int(num_copies)
        self.vectorized = vectorized
        # where each stacked leaf goes in the template: (owner module, slot dict name, name)
        slots = []
        for key in self.params.keys(include_nested=True, leaves_only=True):
            owner = module.get_submodule(".".join(key[:-1]))
            where = "_parameters" if key[-1] in owner._parameters else "_buffers"
            slots.append((owner, where, key[-1]))
        self.__dict__["_slots"] = slots
        self.__dict__["_plan"] = _fused_plan(module, slots)

    def _call_one(self, params: TensorDictBase, tensordict: TensorDictBase):
        with params.to_module(self.module, preserve_module_state=False):
            return self.module(tensordict.copy())

    def _call_with(self, tensors: list, tensordict: TensorDictBase) -> TensorDictBase:
        """Call the template with ``tensors`` (one per slot) in place of its own."""
        saved = []
        try:
            for (owner, where, name), tensor in zip(self._slots, tensors):
                slot = getattr(owner, where)
                saved.append(slot[name])
                slot[name] = tensor
            return self.module(tensordict.copy())
        finally:
            for (owner, where, name), tensor in zip(self._slots, saved):
                getattr(owner, where)[name] = tensor

    def _fused(self, leaves: list, tensordict: TensorDictBase, shared: bool):
        """All copies at once: ``[n, N, in] -> [n, N, out]`` batched products per layer.
        None if an input is missing (the per-copy call then names it)."""
        inputs = [tensordict.get(key, None) for key in self.in_keys]
        if any(x is None for x in inputs):
            return None
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, -1)
        n = leaves[0].shape[0]
        if shared:
            batch = x.shape[:-1]
            h = x.reshape(1, -1, x.shape[-1]).expand(n, -1, -1)
            out = tensordict.expand(n, *tensordict.batch_size)
        else:
            batch = x.shape[1:-1]
            h = x.reshape(n, -1, x.shape[-1])
            out = tensordict.copy()
        fresh = False  # h is a new tensor (a product's output): activations may write into it
        for step in self._plan:
            if callable(step):  # an activation (or the output reshape)
                inplace = _IN_PLACE.get(type(step)) if fresh else None
                h = step(h) if inplace is None else inplace(h)
                fresh = inplace is not None
                continue
            weight = leaves[step[0]].transpose(-1, -2)
            if step[1] is None:
                h = torch.bmm(h, weight)
            else:
                h = torch.baddbmm(leaves[step[1]].unsqueeze(-2), h, weight)
            fresh = True
        out.set(self.out_keys[0], h.reshape(n, *batch, *h.shape[2:]))
        return out

    def forward(
        self,
        tensordict: TensorDictBase,
        shared_input: bool = True,
        params: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """Outputs of all copies, batch ``[n, *B]``.

        Args:
            tensordict: the input, batch ``[*B]`` (``shared_input``) or ``[n, *B]``
                (one input per copy).
            shared_input: whether every copy reads the same input.
            params: stacked parameters to use instead of ``self.params`` (e.g. detached).
        """
        params = self.params if params is None else params
        vectorized = self.vectorized
        if vectorized is None and self._plan is not None:
            out = self._fused(list(params.values(True, True)), tensordict, shared_input)
            if out is not None:
                return out
        if vectorized is None:
            vectorized = next(iter(params.values(True, True))).device.type != "cpu"
        if vectorized:
            in_dims = (0, None if shared_input else 0)
            return torch.vmap(self._call_one, in_dims, randomness="different")(params, tensordict)
        copies_given = (
            params.batch_size[0] if params.batch_dims else self.num_copies
        )  # a subset may be passed
        inputs = [tensordict] * copies_given if shared_input else tensordict.unbind(0)
        # per-copy slices of every stacked leaf: copies[i] holds copy i's tensors
        copies = zip(*(leaf.unbind(0) for leaf in params.values(True, True)))
        return torch.stack([self._call_with(list(t), x) for t, x in zip(copies, inputs)])


_ELEMENTWISE = (nn.ReLU, nn.Tanh, nn.ELU, nn.SiLU, nn.LeakyReLU, nn.GELU, nn.Sigmoid,
                nn.Softplus, nn.Mish, nn.Identity)  # fmt: skip

# in-place forms, applied to a product's output (whose backward does not need it): saves
# allocating a fresh activation tensor per layer
_IN_PLACE = {nn.ReLU: torch.relu_, nn.Tanh: torch.tanh_, nn.Sigmoid: torch.sigmoid_}


def _fused_plan(module: nn.Module, slots: list) -> list | None:
    """The layers of ``module`` as batched steps: ``(weight index, bias index or None)``
    for a linear layer (indices into the stacked leaves), the module itself for an
    activation; None where the module is not a plain affine stack (it then runs per copy).
    """
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules.models._feedforward import MLP, _Reshape
    from torchrl_lite.modules.tensordict_module.common import SafeModule

    plain_call = type(module).forward in (TensorDictModule.forward, SafeModule.forward)
    if not isinstance(module, TensorDictModule) or not plain_call:
        return None
    if getattr(module, "_project_items", None) or len(module.out_keys) != 1:
        return None
    net = module.module
    if type(net) is nn.Linear and len(module.in_keys) == 1:
        layers = [net]
    elif type(net) is MLP:
        layers = list(net)
        if any(isinstance(m, _Reshape) for m in layers[:-1]):
            return None
    else:
        return None
    index = {(id(owner), name): i for i, (owner, _, name) in enumerate(slots)}
    if len(index) != len(slots):
        return None
    plan = []
    for layer in layers:
        if type(layer) is nn.Linear:
            bias = None if layer.bias is None else index[(id(layer), "bias")]
            plan.append((index[(id(layer), "weight")], bias))
        elif type(layer) in _ELEMENTWISE or type(layer) is _Reshape:
            plan.append(layer)
        else:
            return None
    used = sum(1 + (b is not None) for b in (s[1] for s in plan if isinstance(s, tuple)))
    return plan if used == len(slots) else None  # every stacked leaf is a linear layer's
