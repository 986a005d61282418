"""Language models for RLHF: a tiny causal transformer, a Hugging Face adapter, a reward
model, and the token-level actor and critic PPO trains.

Every language model here maps token ids ``tokens [*B, L]`` (long; padding after the
real tokens never matters, attention is causal) to ``(logits [*B, L, V], hidden [*B, L,
H])`` and has ``vocab_size`` and ``hidden_size``: :class:`TinyCausalLM` (GPT-style,
pure torch) or :class:`HFCausalLM` (any ``transformers`` causal LM, e.g.
``GPT2LMHeadModel``). ``length [*B, 1]`` counts the real tokens; the state of a text
env (:class:`~torchrl_lite.envs.custom.text.TextGenerationEnv`) is
``(tokens, length)``, so the next-token distribution is read at position ``length - 1``.

- :class:`CharTokenizer`: characters to ids, with ``<pad>``, ``<bos>``, ``<eos>``.
- :func:`token_actor`: ``ProbabilisticActor`` with a Categorical over the next token.
- :func:`token_critic`: ``ValueOperator`` with a scalar head at position ``length - 1``.
- :class:`RewardModel`: a scalar score of a whole sequence (at its last real token).
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from torch import nn

__all__ = [
    "CharTokenizer",
    "TinyCausalLM",
    "HFCausalLM",
    "RewardModel",
    "token_actor",
    "token_critic",
    "TOKENS",
    "LENGTH",
]

TOKENS = "tokens"
LENGTH = "length"


class CharTokenizer:
    """Characters to token ids: ``<pad>`` 0, ``<bos>`` 1, ``<eos>`` 2, then ``alphabet``.

    Args:
        alphabet: the characters, each one token.

    Example:
        >>> tok = CharTokenizer("abc")
        >>> tok.encode("cab"), tok.decode([1, 5, 3, 4, 2]), tok.vocab_size
        ([5, 3, 4], 'cab', 6)
    """

    specials = ("<pad>", "<bos>", "<eos>")
    pad_token_id, bos_token_id, eos_token_id = 0, 1, 2

    def __init__(self, alphabet: str):
        if len(set(alphabet)) != len(alphabet) or not alphabet:
            raise ValueError(
                f"CharTokenizer: alphabet must be distinct characters, got {alphabet!r}."
            )
        self.alphabet = alphabet
        self._ids = {c: i + len(self.specials) for i, c in enumerate(alphabet)}

    @property
    def vocab_size(self) -> int:
        return len(self.specials) + len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        unknown = sorted(set(text) - set(self._ids))
        if unknown:
            raise ValueError(
                f"CharTokenizer: characters {unknown} are not in the alphabet {self.alphabet!r}."
            )
        return [self._ids[c] for c in text]

    def decode(self, ids) -> str:
        first = len(self.specials)
        return "".join(self.alphabet[i - first] for i in map(int, ids) if i >= first)


def _flat(tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Size]:
    if tokens.dtype != torch.long:
        raise TypeError(f"language models read long token ids, got {tokens.dtype}.")
    return tokens.reshape(-1, tokens.shape[-1]), tokens.shape[:-1]


class TinyCausalLM(nn.Module):
    """A small GPT: token and position embeddings, pre-norm causal blocks, a tied LM head.

    Args:
        vocab_size: tokens ``V``.
        max_length: positions ``L`` embedded (the longest sequence).
        hidden: width ``H``.
        n_layer: transformer blocks.
        n_head: attention heads.
        dropout: dropout of the blocks.

    Example:
        >>> lm = TinyCausalLM(vocab_size=6, max_length=8, hidden=16, n_layer=1)
        >>> logits, hidden = lm(torch.zeros(2, 5, dtype=torch.long))
        >>> logits.shape, hidden.shape
        (torch.Size([2, 5, 6]), torch.Size([2, 5, 16]))
    """

    def __init__(
        self,
        vocab_size: int,
        max_length: int,
        *,
        hidden: int = 64,
        n_layer: int = 2,
        n_head: int = 2,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.vocab_size, self.max_length, self.hidden_size = vocab_size, max_length, hidden
        self.embed = nn.Embedding(vocab_size, hidden)
        self.position = nn.Embedding(max_length, hidden)
        layer = nn.TransformerEncoderLayer(
            hidden,
            n_head,
            4 * hidden,
            dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.blocks = nn.TransformerEncoder(layer, n_layer, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat, batch = _flat(tokens)  # [N, L]
        length = flat.shape[-1]
        if length > self.max_length:
            raise ValueError(
                f"TinyCausalLM: {length} tokens, more than max_length={self.max_length}."
            )
        x = self.embed(flat) + self.position.weight[:length]
        causal = nn.Transformer.generate_square_subsequent_mask(length, device=flat.device)
        hidden = self.norm(self.blocks(x, mask=causal, is_causal=True))  # [N, L, H]
        logits = hidden @ self.embed.weight.T  # [N, L, V]
        return logits.reshape(*batch, length, -1), hidden.reshape(*batch, length, -1)


class HFCausalLM(nn.Module):
    """A Hugging Face causal LM (``transformers``) behind the same ``(logits, hidden)`` call.

    Args:
        model: e.g. ``GPT2LMHeadModel(GPT2Config(...))`` or ``AutoModelForCausalLM.from_pretrained``.

    Example:
        >>> from transformers import GPT2Config, GPT2LMHeadModel  # doctest: +SKIP
        >>> lm = HFCausalLM(GPT2LMHeadModel(GPT2Config(vocab_size=6, n_layer=1, n_embd=16,
        ...     n_head=2, n_positions=8)))  # doctest: +SKIP
        >>> lm(torch.zeros(2, 5, dtype=torch.long))[0].shape  # doctest: +SKIP
        torch.Size([2, 5, 6])
    """

    def __init__(self, model):
        super().__init__()
        config = getattr(model, "config", None)
        if config is None or not hasattr(config, "vocab_size"):
            raise TypeError(
                f"HFCausalLM needs a transformers model with a config, got {type(model).__name__}."
            )
        self.model = model
        self.vocab_size = int(config.vocab_size)
        self.hidden_size = int(getattr(config, "hidden_size", getattr(config, "n_embd", 0)))
        self.max_length = int(
            getattr(config, "n_positions", getattr(config, "max_position_embeddings", 1 << 30))
        )

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        flat, batch = _flat(tokens)
        out = self.model(input_ids=flat, output_hidden_states=True)
        logits, hidden = out.logits, out.hidden_states[-1]
        return logits.reshape(*batch, *logits.shape[-2:]), hidden.reshape(
            *batch, *hidden.shape[-2:]
        )


def _at_last(x: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
    """``x [*B, L, D]`` at position ``length - 1`` (``length [*B, 1]``): ``[*B, D]``."""
    index = (length.long().reshape(*x.shape[:-2], 1, 1) - 1).clamp_min(0)
    return x.gather(-2, index.expand(*x.shape[:-2], 1, x.shape[-1])).squeeze(-2)


class _NextTokenLogits(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, tokens, length):
        return _at_last(self.lm(tokens)[0], length)  # [*B, V]


class _LastValue(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm
        self.head = nn.Linear(lm.hidden_size, 1)

    def forward(self, tokens, length):
        return self.head(_at_last(self.lm(tokens)[1], length))  # [*B, 1]


def token_actor(lm: nn.Module, return_log_prob: bool = True):
    """The token-level policy: Categorical over the next token given ``(tokens, length)``.

    Args:
        lm: a language model (:class:`TinyCausalLM`, :class:`HFCausalLM`).
        return_log_prob: write ``"sample_log_prob"`` (PPO reads it).

    Example:
        >>> from tensordict import TensorDict
        >>> actor = token_actor(TinyCausalLM(6, 8, hidden=16, n_layer=1))
        >>> td = TensorDict(tokens=torch.ones(3, 8, dtype=torch.long),
        ...                 length=torch.full((3, 1), 2), batch_size=[3])
        >>> actor(td)["action"].shape, actor(td)["logits"].shape
        (torch.Size([3]), torch.Size([3, 6]))
    """
    from torchrl_lite.modules.distributions import Categorical
    from torchrl_lite.modules.tensordict_module import ProbabilisticActor

    return ProbabilisticActor(
        TensorDictModule(_NextTokenLogits(lm), in_keys=[TOKENS, LENGTH], out_keys=["logits"]),
        in_keys=["logits"],
        distribution_class=Categorical,
        return_log_prob=return_log_prob,
    )


def token_critic(lm: nn.Module):
    """The value of a partial sequence ``(tokens, length)``: a scalar head on ``lm``.

    Example:
        >>> from tensordict import TensorDict
        >>> critic = token_critic(TinyCausalLM(6, 8, hidden=16, n_layer=1))
        >>> td = TensorDict(tokens=torch.ones(3, 8, dtype=torch.long),
        ...                 length=torch.full((3, 1), 2), batch_size=[3])
        >>> critic(td)["state_value"].shape
        torch.Size([3, 1])
    """
    from torchrl_lite.modules.tensordict_module import ValueOperator

    return ValueOperator(_LastValue(lm), in_keys=[TOKENS, LENGTH])


class RewardModel(nn.Module):
    """A scalar score per sequence: a linear head on ``lm``'s hidden state at its last token.

    Train it on preference pairs with
    :class:`~torchrl_lite.objectives.rlhf.BradleyTerryLoss`.

    Args:
        lm: a language model (its ``vocab_size`` is the reward model's).

    Example:
        >>> rm = RewardModel(TinyCausalLM(6, 8, hidden=16, n_layer=1))
        >>> rm(torch.ones(3, 8, dtype=torch.long), torch.full((3, 1), 4)).shape
        torch.Size([3])
    """

    def __init__(self, lm: nn.Module):
        super().__init__()
        self.lm = lm
        self.vocab_size = lm.vocab_size
        self.head = nn.Linear(lm.hidden_size, 1)

    def forward(self, tokens: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        return self.head(_at_last(self.lm(tokens)[1], length)).squeeze(-1)  # [*B]
