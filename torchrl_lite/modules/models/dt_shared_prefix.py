"""Run the decision transformer's blocks once for the tokens every window shares.

When acting, a batch of windows often starts with the same tokens: TorchRL's
``DecisionTransformerInferenceWrapper`` zeroes all but the last few steps of each env's
window, and ``CatFrames`` pads a young episode with zeros. Under a causal mask the hidden
states of a leading run of tokens depend on those tokens only, so when that run is equal
in every row it is computed for one row, and the other tokens of each row attend to its
keys and values. The result equals the plain per-row computation (up to float rounding);
the cost drops from ``N * S`` tokens to ``L + N * (S - L)`` for ``L`` shared tokens.

Only for evaluation: dropout off and no padding mask (each row's shared tokens are then
the same computation).

Shapes: ``tokens [N, S, H]``; ``L`` shared tokens; output ``[N, S, H]``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["shared_prefix_length", "blocks_with_shared_prefix"]


def shared_prefix_length(tokens: torch.Tensor) -> int:
    """How many leading tokens of ``tokens [N, S, H]`` are equal in every row (host sync)."""
    same = (tokens == tokens[:1]).all(dim=-1).all(dim=0)  # [S]
    return int(same.long().cumprod(0).sum())


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    n, size, hidden = x.shape
    return x.reshape(n, size, heads, hidden // heads).transpose(1, 2)  # [N, heads, S, d]


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    n, heads, size, d = x.shape
    return x.transpose(1, 2).reshape(n, size, heads * d)  # [N, S, H]


def _project(layer: nn.TransformerEncoderLayer, x: torch.Tensor):
    """Queries, keys and values ``[N, heads, S, d]`` of the pre-normed tokens ``x``."""
    attn = layer.self_attn
    q, k, v = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias).chunk(3, dim=-1)
    return tuple(_split_heads(t, attn.num_heads) for t in (q, k, v))


def _finish(layer: nn.TransformerEncoderLayer, x: torch.Tensor, attended: torch.Tensor):
    """Residual attention output, then the residual feed-forward block (pre-norm)."""
    x = x + layer.self_attn.out_proj(_merge_heads(attended))
    return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))


def blocks_with_shared_prefix(
    blocks: nn.TransformerEncoder, tokens: torch.Tensor, shared: int
) -> torch.Tensor:
    """The causal ``blocks`` over ``tokens [N, S, H]`` whose first ``shared`` tokens are
    equal in every row: those run for row 0 only. Pre-norm layers, eval mode."""
    n, size, _ = tokens.shape
    if not 0 < shared < size:
        raise ValueError(f"blocks_with_shared_prefix: shared must be in [1, {size}), got {shared}.")
    if (
        blocks.training
        or blocks.norm is not None
        or not all(layer.norm_first for layer in blocks.layers)
    ):
        raise ValueError(
            "blocks_with_shared_prefix: needs pre-norm layers (norm_first=True), no final "
            "encoder norm, and eval mode (call .eval(); dropout must be off)."
        )
    head, tail = tokens[:1, :shared], tokens[:, shared:]  # [1, L, H], [N, S - L, H]
    # tail query i (position shared + i) sees every key up to its own position
    seen = torch.ones(size - shared, size, dtype=torch.bool, device=tokens.device)
    seen = seen.tril(diagonal=shared)  # [S - L, S]
    for layer in blocks.layers:
        qh, kh, vh = _project(layer, head)
        qt, kt, vt = _project(layer, tail)
        keys = torch.cat([kh.expand(n, -1, -1, -1), kt], dim=2)  # [N, heads, S, d]
        values = torch.cat([vh.expand(n, -1, -1, -1), vt], dim=2)
        head_out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
        tail_out = F.scaled_dot_product_attention(qt, keys, values, attn_mask=seen)
        head, tail = _finish(layer, head, head_out), _finish(layer, tail, tail_out)
    return torch.cat([head.expand(n, -1, -1), tail], dim=1)  # [N, S, H]
