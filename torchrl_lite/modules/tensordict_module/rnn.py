"""TorchRL's ``torchrl.modules.tensordict_module.rnn`` path: the recurrent TensorDict
modules (ours live in :mod:`torchrl_lite.modules.models.recurrent`) and the pure-Python
cells ``GRUCell`` / ``LSTMCell``.

The cells are ``nn.GRUCell`` / ``nn.LSTMCell`` (same parameters, same outputs) computed
with plain tensor operations instead of the fused kernel, so that ``torch.compile`` and
``torch.vmap`` can trace them (TorchRL's Dreamer swaps its RSSM's GRU for one).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from torchrl_lite.modules.models._python_rnn import _gru_cell, _lstm_cell
from torchrl_lite.modules.models.recurrent import (
    GRUModule,
    LSTMModule,
    recurrent_mode,
    set_recurrent_mode,
)

__all__ = ["GRUCell", "GRUModule", "LSTMCell", "LSTMModule", "recurrent_mode", "set_recurrent_mode"]


def _batched(name: str, x: torch.Tensor, hx: torch.Tensor | None):
    """``(x, hx, unbatched)`` with a batch dim added to a 1-D input."""
    if x.dim() not in (1, 2):
        raise ValueError(
            f"{name}: expected a 1-D or 2-D input [N, F], got {x.dim()}-D {list(x.shape)}."
        )
    unbatched = x.dim() == 1
    if unbatched:
        x = x.unsqueeze(0)
        hx = None if hx is None else hx.unsqueeze(0)
    return x, hx, unbatched


class GRUCell(nn.GRUCell):
    """``nn.GRUCell`` in plain tensor operations: ``(x [N, F], h [N, H]) -> h' [N, H]``.

    Example:
        >>> cell = GRUCell(3, 4)
        >>> ref = nn.GRUCell(3, 4)
        >>> ref.load_state_dict(cell.state_dict())
        <All keys matched successfully>
        >>> x, h = torch.randn(2, 3), torch.randn(2, 4)
        >>> torch.allclose(cell(x, h), ref(x, h), atol=1e-6)
        True
    """

    def forward(self, input: torch.Tensor, hx: torch.Tensor | None = None) -> torch.Tensor:
        x, hx, unbatched = _batched("GRUCell", input, hx)
        if hx is None:
            hx = x.new_zeros(x.shape[0], self.hidden_size)
        gi = F.linear(x, self.weight_ih, self.bias_ih)  # [N, 3H]
        gh = F.linear(hx, self.weight_hh, self.bias_hh)  # [N, 3H]
        out = _gru_cell(gi, gh, hx)
        return out.squeeze(0) if unbatched else out


class LSTMCell(nn.LSTMCell):
    """``nn.LSTMCell`` in plain tensor operations: ``(x, (h, c)) -> (h', c')``.

    Example:
        >>> cell = LSTMCell(3, 4)
        >>> ref = nn.LSTMCell(3, 4)
        >>> ref.load_state_dict(cell.state_dict())
        <All keys matched successfully>
        >>> x = torch.randn(2, 3)
        >>> all(torch.allclose(a, b, atol=1e-6) for a, b in zip(cell(x), ref(x)))
        True
    """

    def forward(self, input: torch.Tensor, hx: tuple | None = None):
        h, c = (None, None) if hx is None else hx
        x, h, unbatched = _batched("LSTMCell", input, h)
        if h is None:
            h = x.new_zeros(x.shape[0], self.hidden_size)
            c = x.new_zeros(x.shape[0], self.hidden_size)
        elif unbatched:
            c = c.unsqueeze(0)
        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(
            h, self.weight_hh, self.bias_hh
        )
        h, c = _lstm_cell(gates, c)  # [N, H] each
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)
