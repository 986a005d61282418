"""TextGenerationEnv: generating text one token at a time, in the EnvBase contract.

State (and observation): ``"tokens"`` ``[*B, max_length]`` long (the prompt then the
generated tokens, ``pad_token_id`` after them) and ``"length"`` ``[*B, 1]`` (real tokens).
Action: the next token id ``[*B]`` (``Categorical(vocab_size)``). A step appends it;
the episode is done (``terminated``) at ``eos_token_id`` and ``truncated`` at
``max_length`` tokens. The reward is 0 until the last step, where it is
``reward_fn(tokens, length)`` of the whole sequence (e.g. a
:class:`~torchrl_lite.modules.models.language.RewardModel`). A reset draws a prompt
uniformly from ``prompts``.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite.data.tensor_specs import Bounded, Categorical, Composite
from torchrl_lite.envs.common import EnvBase

__all__ = ["TextGenerationEnv", "check_vocabularies"]

TOKENS, LENGTH = "tokens", "length"


def check_vocabularies(**models) -> int:
    """The common ``vocab_size`` of ``models`` (name=model); ValueError when they differ.

    Example:
        >>> from torchrl_lite.modules.models.language import TinyCausalLM
        >>> check_vocabularies(policy=TinyCausalLM(6, 8, hidden=8, n_layer=1), reward_model=TinyCausalLM(6, 8, hidden=8, n_layer=1))
        6
    """
    sizes = {name: getattr(m, "vocab_size", m) for name, m in models.items() if m is not None}
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{name} {size}" for name, size in sizes.items())
        raise ValueError(
            f"the models have different vocabularies ({listed} tokens): the reward model must "
            "read the policy's token ids; build both with the same tokenizer."
        )
    return next(iter(sizes.values()))


class TextGenerationEnv(EnvBase):
    """Token-by-token generation from prompts; the sequence's reward at its end.

    Args:
        prompts: token-id lists (each starts the sequence; e.g. ``[bos] + tokenizer.encode(...)``).
        vocab_size: tokens of the policy's vocabulary.
        max_length: the longest sequence (prompt included).
        eos_token_id: ends the episode (terminated).
        pad_token_id: fills ``tokens`` after the real ones.
        reward_fn: ``(tokens [N, max_length], length [N, 1]) -> score [N]``, e.g. a
            ``RewardModel`` (its ``vocab_size`` must be ``vocab_size``); None: reward 0.
        batch_size: parallel sequences.
        seed: seed of the prompt draws.

    Raises:
        ValueError: a prompt is empty or not shorter than ``max_length``; a token id or
            ``eos``/``pad`` outside the vocabulary; a reward model of another vocabulary.

    Example:
        >>> env = TextGenerationEnv([[1, 3], [1, 4, 4]], vocab_size=6, max_length=6,
        ...     eos_token_id=2, reward_fn=lambda tokens, length: length.squeeze(-1).float())
        >>> td = env.rollout(10)
        >>> bool(td["next", "done"][-1]), td["next", "tokens"].shape[-1]
        (True, 6)
    """

    def __init__(
        self,
        prompts,
        vocab_size: int,
        max_length: int,
        eos_token_id: int,
        *,
        pad_token_id: int = 0,
        reward_fn=None,
        batch_size=None,
        seed: int | None = None,
        device=None,
    ):
        super().__init__(device=device, batch_size=batch_size)
        prompts = [list(map(int, p)) for p in prompts]
        if not prompts:
            raise ValueError("TextGenerationEnv: give at least one prompt.")
        for name, value in (("eos_token_id", eos_token_id), ("pad_token_id", pad_token_id)):
            if not 0 <= value < vocab_size:
                raise ValueError(
                    f"TextGenerationEnv: {name}={value} is outside the vocabulary [0, {vocab_size})."
                )
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(
                    f"TextGenerationEnv: prompt {i} is empty; start it with a BOS token."
                )
            if len(p) >= max_length:
                raise ValueError(
                    f"TextGenerationEnv: prompt {i} has {len(p)} tokens, not shorter than "
                    f"max_length={max_length}: no token could be generated. Raise max_length "
                    f"above {len(p)} or shorten the prompt."
                )
            bad = [t for t in p if not 0 <= t < vocab_size]
            if bad:
                raise ValueError(
                    f"TextGenerationEnv: prompt {i} has token ids {bad} outside [0, {vocab_size})."
                )
        if reward_fn is not None and hasattr(reward_fn, "vocab_size"):
            check_vocabularies(policy=vocab_size, reward_model=reward_fn)
        self.vocab_size, self.max_length = int(vocab_size), int(max_length)
        self.eos_token_id, self.pad_token_id = int(eos_token_id), int(pad_token_id)
        self.reward_fn = reward_fn
        table = torch.full((len(prompts), max_length), pad_token_id, dtype=torch.long)
        for i, p in enumerate(prompts):
            table[i, : len(p)] = torch.tensor(p)
        self._prompts = table.to(self.device)  # [P, max_length]
        self._prompt_lengths = torch.tensor([len(p) for p in prompts], device=self.device)
        self._rng = torch.Generator(device=self.device)
        self._rng.manual_seed(int(seed) if seed is not None else int(torch.randint(1 << 62, ())))
        batch = self.batch_size
        self.full_observation_spec = Composite(
            {
                TOKENS: Bounded(
                    0, vocab_size - 1, (*batch, max_length), dtype=torch.long, device=self.device
                ),
                LENGTH: Bounded(1, max_length, (*batch, 1), dtype=torch.long, device=self.device),
            },
            shape=batch,
            device=self.device,
        )
        self.full_state_spec = self.full_observation_spec.clone()
        self.full_action_spec = Composite(
            {K.ACTION: Categorical(vocab_size, batch, device=self.device)},
            shape=batch,
            device=self.device,
        )

    # -- the contract --------------------------------------------------------------------
    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        batch = self.batch_size
        n = batch.numel()
        pick = torch.randint(len(self._prompts), (n,), generator=self._rng, device=self.device)
        tokens = self._prompts[pick].reshape(*batch, self.max_length)
        length = self._prompt_lengths[pick].reshape(*batch, 1)
        mask = None if tensordict is None else tensordict.get(K.RESET, None)
        if mask is not None and tensordict.get(TOKENS, None) is not None:  # partial reset
            keep = ~mask.reshape(*batch, 1)
            tokens = torch.where(keep, tensordict.get(TOKENS), tokens)
            length = torch.where(keep, tensordict.get(LENGTH), length)
        return TensorDict({TOKENS: tokens, LENGTH: length}, batch_size=batch, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        tokens, length = tensordict.get(TOKENS), tensordict.get(LENGTH)  # [*B, L], [*B, 1]
        action = tensordict.get(K.ACTION).long().reshape(*length.shape)  # [*B, 1]
        position = length.clamp_max(self.max_length - 1)
        tokens = tokens.scatter(-1, position, action)  # a new tensor
        length = length + 1
        terminated = action == self.eos_token_id  # [*B, 1]
        truncated = (length >= self.max_length) & ~terminated
        done = terminated | truncated
        reward = torch.zeros(length.shape, dtype=torch.float32, device=self.device)
        if self.reward_fn is not None and bool(done.any()):
            rows = done.reshape(-1)
            with torch.no_grad():
                score = self.reward_fn(
                    tokens.reshape(-1, self.max_length)[rows], length.reshape(-1, 1)[rows]
                )
            reward.reshape(-1)[rows] = score.reshape(-1).to(reward.dtype)
        return TensorDict(
            {
                TOKENS: tokens,
                LENGTH: length,
                K.REWARD: reward,
                K.DONE: done,
                K.TERMINATED: terminated,
                K.TRUNCATED: truncated,
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int) -> None:
        self._rng.manual_seed(int(seed))
