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


def _split_qkv(qkv: torch.Tensor, heads: int):
    """Queries, keys, values ``[N, heads, S, d]`` from a packed projection ``[N, S, 3H]``."""
    return tuple(_split_heads(t, heads) for t in qkv.chunk(3, dim=-1))


def _merge_heads(x: torch.Tensor) -> torch.Tensor:
    n, heads, size, d = x.shape
    return x.transpose(1, 2).reshape(n * size, heads * d)  # [N * S, H]


def blocks_with_shared_prefix(
    blocks: nn.TransformerEncoder, tokens: torch.Tensor, shared: int
) -> torch.Tensor:
    """The causal ``blocks`` over ``tokens [N, S, H]`` whose first ``shared`` tokens are
    equal in every row: those run for row 0 only. Pre-norm layers, eval mode.

    The rows computed (the ``L`` shared tokens, then each row's ``S - L`` own tokens) sit
    in one ``[L + N * (S - L), H]`` matrix, so every layer's norms, projections and
    feed-forward are one call each; only the attention splits them.
    """
    n, size, hidden = tokens.shape
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
    own = size - shared
    x = torch.cat([tokens[0, :shared], tokens[:, shared:].reshape(n * own, hidden)])
    # a row's own query i (position shared + i) sees every key up to its own position
    seen = torch.ones(own, size, dtype=torch.bool, device=tokens.device).tril(shared)  # [S-L, S]
    for layer in blocks.layers:
        attn = layer.self_attn
        qkv = F.linear(layer.norm1(x), attn.in_proj_weight, attn.in_proj_bias)  # [R, 3H]
        qh, kh, vh = _split_qkv(qkv[None, :shared], attn.num_heads)
        qt, kt, vt = _split_qkv(qkv[shared:].reshape(n, own, 3 * hidden), attn.num_heads)
        keys = torch.cat([kh.expand(n, -1, -1, -1), kt], dim=2)  # [N, heads, S, d]
        values = torch.cat([vh.expand(n, -1, -1, -1), vt], dim=2)
        attended = torch.cat(
            [
                _merge_heads(F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)),
                _merge_heads(F.scaled_dot_product_attention(qt, keys, values, attn_mask=seen)),
            ]
        )  # [R, H]
        x = x + attn.out_proj(attended)
        x = x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))
    head = x[:shared].expand(n, shared, hidden)
    return torch.cat([head, x[shared:].reshape(n, own, hidden)], dim=1)  # [N, S, H]
