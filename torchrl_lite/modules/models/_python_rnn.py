"""A pure-Python LSTM / GRU over an ``nn.LSTM`` / ``nn.GRU``'s own weights.

``LSTMModule(python_based=True)`` (TorchRL's switch) runs this instead of the fused
kernel, one ``F.linear`` per step, so that ``torch.vmap`` and ``torch.compile`` can trace
it. The maths are PyTorch's (gate order ``i, f, g, o`` for the LSTM and ``r, z, n`` for the
GRU); the call mirrors the module's: batch-first input ``[N, T, F]`` or a
``PackedSequence``, states ``[L, N, H]``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence


def _lstm_cell(gates, c):
    i, f, g, o = gates.chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def _gru_cell(gi, gh, h):
    ir, iz, in_ = gi.chunk(3, -1)
    hr, hz, hn = gh.chunk(3, -1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    return (1 - z) * n + z * h


def python_rnn(rnn: nn.RNNBase, x, states):
    """``rnn(x, states)`` computed step by step in Python (same outputs, same shapes).

    Args:
        rnn: a batch-first, unidirectional ``nn.LSTM`` (without projections) or ``nn.GRU``.
        x: the input ``[N, T, F]``, or a ``PackedSequence`` of such rows.
        states: ``(h0, c0)`` for the LSTM, ``h0`` for the GRU, each ``[L, N, H]``.

    Returns:
        ``(y, h_n)`` as ``rnn`` returns them (``y`` packed when ``x`` is).
    """
    lstm = isinstance(rnn, nn.LSTM)
    if rnn.bidirectional or (lstm and rnn.proj_size) or not rnn.batch_first:
        raise ValueError(
            f"python_based=True runs batch-first unidirectional rnns without projections; "
            f"got {rnn}. Use python_based=False."
        )
    packed = isinstance(x, PackedSequence)
    lengths = None
    if packed:
        x, lengths = pad_packed_sequence(x, batch_first=True)  # [N, T, F], original order
    steps = x.shape[1]
    mask = None
    if lengths is not None:  # [N, T, 1]: past its length a row keeps its state
        mask = (torch.arange(steps)[None, :] < lengths[:, None]).to(x.device).unsqueeze(-1)
    h0, c0 = states if lstm else (states, None)
    layer_in, h_n, c_n = x, [], []
    for layer in range(rnn.num_layers):
        w_ih, w_hh = getattr(rnn, f"weight_ih_l{layer}"), getattr(rnn, f"weight_hh_l{layer}")
        b_ih = getattr(rnn, f"bias_ih_l{layer}") if rnn.bias else None
        b_hh = getattr(rnn, f"bias_hh_l{layer}") if rnn.bias else None
        gi = F.linear(layer_in, w_ih, b_ih)  # [N, T, G*H]: the input part of every step
        h = h0[layer]
        c = c0[layer] if lstm else None
        outputs = []
        for t in range(steps):
            gh = F.linear(h, w_hh, b_hh)  # [N, G*H]
            if lstm:
                h_new, c_new = _lstm_cell(gi[:, t] + gh, c)
            else:
                h_new, c_new = _gru_cell(gi[:, t], gh, h), None
            if mask is not None:
                h_new = torch.where(mask[:, t], h_new, h)
                c_new = torch.where(mask[:, t], c_new, c) if lstm else None
            h, c = h_new, c_new
            outputs.append(h)
        layer_in = torch.stack(outputs, 1)  # [N, T, H]
        if rnn.dropout and rnn.training and layer < rnn.num_layers - 1:
            layer_in = F.dropout(layer_in, rnn.dropout, training=True)
        h_n.append(h)
        c_n.append(c)
    y = layer_in
    if packed:
        y = pack_padded_sequence(y * mask, lengths, batch_first=True, enforce_sorted=False)
    h_n = torch.stack(h_n)  # [L, N, H]
    return y, ((h_n, torch.stack(c_n)) if lstm else h_n)
