"""RLHF end to end, offline, on a laptop: pre-train a tiny LM, learn a reward model from
preferences, fine-tune the LM with PPO under a KL leash to the reference.

1. A synthetic corpus: ``<bos>`` + 2 to 12 letters drawn uniformly from ``abcdefgh`` +
   ``<eos>``. A :class:`TinyCausalLM` is pre-trained on it (next-token cross-entropy).
2. Preferences with a known rule: pairs of completions sampled from the pre-trained LM;
   the one with more ``a`` letters in its generated part is preferred (ties dropped).
3. A :class:`RewardModel` (its own tiny LM plus a scalar head) is trained on 80% of the
   pairs with :class:`BradleyTerryLoss`; its accuracy on the other 20% is reported.
4. PPO on token-level actions in a :class:`TextGenerationEnv` (state = token ids,
   action = next token, done at ``<eos>`` or ``max_length``, the reward model's score at
   the end), with a KL penalty to the frozen pre-trained LM. ``--kl reward`` (default)
   puts ``-beta * (log pi_old - log pi_ref)`` in each token's reward
   (:class:`KLRewardPenalty`); ``--kl loss`` adds ``beta * KL(pi || pi_ref)`` to the PPO
   loss instead (:class:`KLPenalizedPPOLoss`). ``beta`` starts at ``--beta`` and adapts
   after each PPO iteration toward ``--kl-target`` nats per sequence (Ziegler et al.
   2019's controller; ``--kl-target 0`` keeps it fixed), so the KL stays under
   ``KL_BOUND`` whatever the seed.
5. Report: held-out RM accuracy, the mean RM score of 512 sequences of the reference and
   of the fine-tuned policy, the fine-tuned policy's KL to the reference (nats per
   sequence, sampled) and the true rule (mean count of ``a``).

``--hf`` runs the same pipeline with a Hugging Face ``GPT2LMHeadModel`` (randomly
initialised, tiny config) and a tokenizer built locally (needs ``transformers``).
``TORCHRL_LITE_SMOKE=1`` shrinks every budget.

Usage: ``python tutorials/rlhf_example.py [--seed S] [--kl reward|loss] [--hf] [--json OUT]``
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import time

import torch
from tensordict import TensorDict

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import ExplorationType, set_exploration_type
from torchrl_lite.envs.custom.text import TextGenerationEnv, check_vocabularies
from torchrl_lite.modules.models.language import (
    CharTokenizer,
    HFCausalLM,
    RewardModel,
    TinyCausalLM,
    token_actor,
    token_critic,
)
from torchrl_lite.objectives import (
    BradleyTerryLoss,
    ClipPPOLoss,
    KLPenalizedPPOLoss,
    KLRewardPenalty,
)
from torchrl_lite.objectives.value import GAE

ALPHABET = "abcdefgh"
MAX_LENGTH = 16
SMOKE = os.environ.get("TORCHRL_LITE_SMOKE", "0") == "1"
PRETRAIN_STEPS = 40 if SMOKE else 600
RM_STEPS = 30 if SMOKE else 400
PAIRS = 128 if SMOKE else 1500
PPO_ITERS = 2 if SMOKE else 25
KL_BOUND = 4.0
"""The stated bound on the fine-tuned policy's KL to the reference (nats per sequence)."""
KL_TARGET = 2.5
"""The KL (nats per sequence) the adaptive ``beta`` steers to (``--kl-target 0``: fixed)."""


# -- the tokenizer and the models ----------------------------------------------------------
class Tokens:
    """What the pipeline needs of a tokenizer: ids of the specials, encode, vocab size."""

    def __init__(self, encode, vocab_size: int, bos: int, eos: int, pad: int):
        self.encode, self.vocab_size = encode, vocab_size
        self.bos_token_id, self.eos_token_id, self.pad_token_id = bos, eos, pad


def tiny_setup():
    tok = CharTokenizer(ALPHABET)
    tokens = Tokens(
        tok.encode, tok.vocab_size, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
    )
    return tokens, lambda: TinyCausalLM(tok.vocab_size, MAX_LENGTH, hidden=32, n_layer=2)


def hf_setup():
    """A GPT-2 (random weights, tiny config) and a word-level tokenizer built locally."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<bos>": 1, "<eos>": 2, **{c: i + 3 for i, c in enumerate(ALPHABET)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    hf_tok = PreTrainedTokenizerFast(
        tokenizer_object=core, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>"
    )
    tokens = Tokens(
        lambda text: hf_tok.encode(text, add_special_tokens=False), len(hf_tok),
        hf_tok.bos_token_id, hf_tok.eos_token_id, hf_tok.pad_token_id,
    )  # fmt: skip
    config = GPT2Config(
        vocab_size=len(hf_tok), n_positions=MAX_LENGTH, n_embd=32, n_layer=1, n_head=2,
        bos_token_id=tokens.bos_token_id, eos_token_id=tokens.eos_token_id,
    )  # fmt: skip
    return tokens, lambda: HFCausalLM(GPT2LMHeadModel(config))


# -- 1. pre-training -----------------------------------------------------------------------
def corpus(tokens: Tokens, n: int, gen: torch.Generator) -> torch.Tensor:
    """``[n, MAX_LENGTH]`` sequences ``<bos> letters <eos> <pad>...``."""
    rows = torch.full((n, MAX_LENGTH), tokens.pad_token_id, dtype=torch.long)
    for i in range(n):
        k = int(torch.randint(2, 13, (), generator=gen))
        text = "".join(ALPHABET[int(j)] for j in torch.randint(len(ALPHABET), (k,), generator=gen))
        ids = [tokens.bos_token_id, *tokens.encode(text), tokens.eos_token_id]
        rows[i, : len(ids)] = torch.tensor(ids)
    return rows


def pretrain(lm, data: torch.Tensor, pad: int, steps: int, gen: torch.Generator) -> float:
    """Next-token cross-entropy on ``data``; returns the last loss."""
    optim = torch.optim.Adam(lm.parameters(), lr=3e-3)
    for _ in range(steps):
        batch = data[torch.randint(len(data), (64,), generator=gen)]
        logits = lm(batch[:, :-1])[0]  # [64, L-1, V]
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1), ignore_index=pad
        )
        optim.zero_grad()
        loss.backward()
        optim.step()
    return float(loss.detach())


# -- sampling through the env --------------------------------------------------------------
def make_env(tokens: Tokens, batch: int, seed: int, reward_fn=None) -> TextGenerationEnv:
    gen = torch.Generator().manual_seed(seed)
    prompts = [
        [
            tokens.bos_token_id,
            *tokens.encode(
                "".join(ALPHABET[int(j)] for j in torch.randint(8, (2,), generator=gen))
            ),
        ]
        for _ in range(32)
    ]
    return TextGenerationEnv(
        prompts, tokens.vocab_size, MAX_LENGTH, tokens.eos_token_id,
        pad_token_id=tokens.pad_token_id, reward_fn=reward_fn, batch_size=[batch], seed=seed,
    )  # fmt: skip


@torch.no_grad()
def sample_sequences(actor, tokens: Tokens, n: int, seed: int) -> TensorDict:
    """``n`` finished sequences of ``actor`` (``tokens [n, L]``, ``length``, ``prompt_length``)."""
    env = make_env(tokens, n, seed)
    start = env.reset()
    with set_exploration_type(ExplorationType.RANDOM):
        rollout = env.rollout(
            MAX_LENGTH, actor, break_when_any_done=False, tensordict=start.clone()
        )
    done = rollout["next", "done"].squeeze(-1)  # [n, T]
    first = done.float().argmax(-1)  # the first episode's last step
    rows = torch.arange(n)
    return TensorDict(
        tokens=rollout["next", "tokens"][rows, first], length=rollout["next", "length"][rows, first],
        prompt_length=start["length"], batch_size=[n],
    )  # fmt: skip


def rule_score(seqs: TensorDict, a_id: int) -> torch.Tensor:
    """The known preference rule: count of ``a`` in the generated part ``[n]``."""
    position = torch.arange(MAX_LENGTH)
    generated = (position >= seqs["prompt_length"]) & (position < seqs["length"])
    return ((seqs["tokens"] == a_id) & generated).sum(-1).float()


# -- 2-3. preferences and the reward model -------------------------------------------------
def preferences(seqs: TensorDict, a_id: int) -> TensorDict:
    """Pairs (consecutive sequences) with ``chosen`` the one the rule prefers; ties dropped."""
    half = seqs.shape[0] // 2
    first, second = seqs[:half], seqs[half : 2 * half]
    s1, s2 = rule_score(first, a_id), rule_score(second, a_id)
    keep = s1 != s2
    chosen_first = (s1 > s2)[keep]
    first, second = first[keep], second[keep]
    pick = chosen_first.reshape(-1, 1)
    side = lambda a, b: TensorDict(  # noqa: E731
        tokens=torch.where(pick, a["tokens"], b["tokens"]),
        length=torch.where(pick, a["length"], b["length"]), batch_size=a.shape,
    )  # fmt: skip
    return TensorDict(
        chosen=side(first, second), rejected=side(second, first), batch_size=first.shape
    )


def train_reward_model(rm, pairs: TensorDict, steps: int, gen: torch.Generator) -> float:
    loss_fn = BradleyTerryLoss(rm)
    optim = torch.optim.Adam(rm.parameters(), lr=1e-3)
    for _ in range(steps):
        out = loss_fn(pairs[torch.randint(len(pairs), (64,), generator=gen)])
        optim.zero_grad()
        out["loss"].backward()
        optim.step()
    return float(out["loss"].detach())


# -- 4. PPO with a KL leash ----------------------------------------------------------------
def finetune(
    actor,
    reference,
    critic,
    rm,
    tokens,
    *,
    kl: str,
    beta: float,
    iters: int,
    seed: int,
    envs: int = 32,
    kl_target: float | None = None,
) -> list:
    """PPO iterations of ``envs * MAX_LENGTH`` tokens; returns the mean end-of-sequence
    reward (score and KL penalty of the last token) of each iteration.

    ``kl_target`` (nats per sequence; None: ``beta`` stays fixed) adapts ``beta`` after
    each iteration as in Ziegler et al. 2019 (https://arxiv.org/abs/1909.08593):
    ``beta *= 1 + clip(KL / kl_target - 1, -0.2, 0.2)``, with ``KL`` the batch's sampled
    ``sum_t log pi_old - log pi_ref`` per finished sequence (their rate ``K_beta = 0.1``
    per step is for far more steps; here it is 1 per iteration, i.e. at most 20%)."""
    env = make_env(tokens, envs, seed, reward_fn=rm)
    steps = envs * MAX_LENGTH
    collector = SyncDataCollector(env, actor, frames_per_batch=steps, total_frames=steps * iters)
    gae = GAE(gamma=1.0, lmbda=0.95, value_network=critic)
    if kl == "reward":
        loss_fn = ClipPPOLoss(actor, critic, entropy_coef=0.0, normalize_advantage=True)
        penalty = KLRewardPenalty(reference, beta)
    else:
        loss_fn = KLPenalizedPPOLoss(
            actor,
            critic,
            reference=reference,
            beta=beta,
            entropy_coef=0.0,
            normalize_advantage=True,
        )
        penalty = None
    meter = penalty if penalty is not None else KLRewardPenalty(reference, 0.0)  # kl_ref only
    optim = torch.optim.Adam(loss_fn.parameters(), lr=5e-4)
    history = []
    for batch in collector:
        batch = meter(batch)  # with the penalty in the reward (``--kl reward``)
        with torch.no_grad():
            batch = gae(batch)
        flat = batch.reshape(-1)
        for _ in range(4):  # epochs
            for idx in torch.randperm(flat.numel()).split(128):
                losses = loss_fn(flat[idx])
                total = sum(v for k, v in losses.items() if k.startswith("loss_"))
                optim.zero_grad()
                total.backward()
                torch.nn.utils.clip_grad_norm_(loss_fn.parameters(), 1.0)
                optim.step()
        done = batch["next", "done"]
        history.append(float(batch["next", "reward"][done].mean()) if done.any() else float("nan"))
        if kl_target:
            kl_seq = float(batch["kl_ref"].sum()) / max(1, int(done.sum()))
            beta *= 1.0 + min(0.2, max(-0.2, kl_seq / kl_target - 1.0))
            (penalty if penalty is not None else loss_fn).beta = beta
        collector.update_policy_weights_()
    collector.shutdown()
    return history


@torch.no_grad()
def sequence_kl(actor, reference, seqs: TensorDict) -> float:
    """Mean over sequences of ``sum_t log pi(a_t) - log pi_ref(a_t)`` on the generated tokens."""
    total = torch.zeros(seqs.shape[0])
    for t in range(MAX_LENGTH - 1):
        length = torch.full((seqs.shape[0], 1), t + 1)
        active = (length.squeeze(-1) >= seqs["prompt_length"].squeeze(-1)) & (
            length.squeeze(-1) < seqs["length"].squeeze(-1)
        )
        if not active.any():
            continue
        td = TensorDict(tokens=seqs["tokens"], length=length, batch_size=seqs.shape)
        action = seqs["tokens"][:, t + 1]
        lp = actor.get_dist(td.clone()).log_prob(action) - reference.get_dist(td.clone()).log_prob(
            action
        )
        total += torch.where(active, lp, torch.zeros_like(lp))
    return float(total.mean())


def main(
    seed: int = 0,
    kl: str = "reward",
    hf: bool = False,
    beta: float = 0.2,
    kl_target: float | None = KL_TARGET,
) -> dict:
    torch.manual_seed(seed)
    start = time.perf_counter()
    gen = torch.Generator().manual_seed(seed)
    tokens, new_lm = hf_setup() if hf else tiny_setup()
    a_id = tokens.encode("a")[0]
    lm = new_lm()
    pretrain_loss = pretrain(
        lm, corpus(tokens, 4000, gen), tokens.pad_token_id, PRETRAIN_STEPS, gen
    )
    reference = token_actor(lm)  # frozen: never given to an optimizer
    seqs = sample_sequences(reference, tokens, 2 * PAIRS, seed + 1)
    pairs = preferences(seqs, a_id)
    cut = int(0.8 * len(pairs))
    rm = RewardModel(new_lm())
    check_vocabularies(policy=lm, reward_model=rm)
    train_reward_model(rm, pairs[:cut], RM_STEPS, gen)
    with torch.no_grad():
        held_out = BradleyTerryLoss(rm)(pairs[cut:])["accuracy"].item()
    actor = token_actor(copy.deepcopy(lm))
    critic = token_critic(copy.deepcopy(lm))
    history = finetune(
        actor, reference, critic, rm, tokens, kl=kl, beta=beta, iters=PPO_ITERS, seed=seed + 2,
        kl_target=kl_target,
    )  # fmt: skip
    ref_seqs = sample_sequences(reference, tokens, 512, seed + 3)
    new_seqs = sample_sequences(actor, tokens, 512, seed + 3)
    with torch.no_grad():
        score_ref = rm(ref_seqs["tokens"], ref_seqs["length"]).mean().item()
        score_new = rm(new_seqs["tokens"], new_seqs["length"]).mean().item()
    info = {
        "seed": seed, "kl_mode": kl, "hf": hf, "beta": beta, "kl_target": kl_target, "pretrain_loss": pretrain_loss,
        "pairs": len(pairs), "rm_accuracy": held_out, "score_reference": score_ref,
        "score_policy": score_new, "kl": sequence_kl(actor, reference, new_seqs),
        "kl_bound": KL_BOUND, "rule_reference": rule_score(ref_seqs, a_id).mean().item(),
        "rule_policy": rule_score(new_seqs, a_id).mean().item(), "reward_history": history,
        "seconds": time.perf_counter() - start,
    }  # fmt: skip
    return info


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--kl", choices=["reward", "loss"], default="reward")
    parser.add_argument("--beta", type=float, default=0.2)
    parser.add_argument(
        "--kl-target", type=float, default=KL_TARGET, help="adaptive beta's KL (0: fixed beta)"
    )
    parser.add_argument("--hf", action="store_true", help="a Hugging Face GPT-2 (tiny, random)")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args()
    torch.set_num_threads(int(os.environ.get("TORCHRL_LITE_THREADS", "1")))
    result = main(args.seed, args.kl, args.hf, args.beta, args.kl_target or None)
    print(json.dumps({k: v for k, v in result.items() if k != "reward_history"}, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
