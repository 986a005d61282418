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
    ``[n, *td.batch_size]``. On accelerators the copies run under ``torch.vmap`` (one
    batched kernel per layer); on CPU they run one after the other on slices of the stacked
    parameters, which is faster there. The first copy keeps ``module``'s values; the others
    are re-initialised with each sub-module's ``reset_parameters()``.

    Args:
        module: the TensorDict module to copy (its buffers become stacked parameters too).
        num_copies: the number of copies ``n``.
        vectorized: force ``torch.vmap`` (True) or the loop (False); None picks by device.

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
