"""RLHF losses against hand-written formulas; short reward-model and KL-penalized PPO runs;
the same pipeline on a tiny Hugging Face GPT-2."""

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl_lite.modules.models.language import (
    CharTokenizer,
    RewardModel,
    TinyCausalLM,
    token_actor,
    token_critic,
)
from torchrl_lite.objectives import BradleyTerryLoss, KLPenalizedPPOLoss, KLRewardPenalty

V, L = 7, 8


def _lm(seed=0):
    torch.manual_seed(seed)
    return TinyCausalLM(V, L, hidden=16, n_layer=1)


def _states(n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return TensorDict(
        tokens=torch.randint(V, (n, L), generator=g), length=torch.randint(1, L, (n, 1), generator=g),
        batch_size=[n],
    )  # fmt: skip


def _example():
    path = Path(__file__).resolve().parents[2] / "tutorials" / "rlhf_example.py"
    spec = importlib.util.spec_from_file_location("rlhf_example", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["rlhf_example"] = module
    spec.loader.exec_module(module)
    return module


def test_bradley_terry_matches_the_formula():
    rm = RewardModel(_lm())
    chosen, rejected = _states(6, 1), _states(6, 2)
    out = BradleyTerryLoss(rm)(TensorDict(chosen=chosen, rejected=rejected, batch_size=[6]))
    rc, rr = rm(chosen["tokens"], chosen["length"]), rm(rejected["tokens"], rejected["length"])
    torch.testing.assert_close(out["loss"], -torch.log(torch.sigmoid(rc - rr)).mean())
    assert out["accuracy"].item() == (rc > rr).float().mean().item()
    with pytest.raises(KeyError, match="rejected"):
        BradleyTerryLoss(rm)(TensorDict(chosen=chosen, batch_size=[6]))


def test_reward_model_reads_the_last_real_token():
    rm = RewardModel(_lm())
    s = _states(4)
    changed = s["tokens"].clone()
    for i, n in enumerate(s["length"].flatten().tolist()):
        changed[i, n:] = (changed[i, n:] + 1) % V  # tokens after the sequence
    torch.testing.assert_close(rm(changed, s["length"]), rm(s["tokens"], s["length"]))


def test_kl_reward_penalty_matches_the_formula():
    policy, reference = token_actor(_lm(0)), token_actor(_lm(1))
    td = policy(_states())
    td["next", "reward"] = torch.arange(5.0).unsqueeze(-1)
    logits_ref = reference(td.select("tokens", "length").clone())["logits"]
    ref = F.log_softmax(logits_ref, -1).gather(-1, td["action"].unsqueeze(-1))
    expected = torch.arange(5.0).unsqueeze(-1) - 0.3 * (td["sample_log_prob"].unsqueeze(-1) - ref)
    out = KLRewardPenalty(reference, beta=0.3)(td.clone())
    torch.testing.assert_close(out["next", "reward"], expected)
    with pytest.raises(ValueError, match="beta must be >= 0"):
        KLRewardPenalty(reference, beta=-1.0)


def test_kl_penalized_ppo_loss_adds_the_exact_kl_and_trains_the_actor_only():
    lm, ref_lm = _lm(0), _lm(1)
    actor, reference, critic = token_actor(lm), token_actor(ref_lm), token_critic(_lm(2))
    loss_fn = KLPenalizedPPOLoss(actor, critic, reference=reference, beta=0.2)
    td = actor(_states())
    td["advantage"], td["value_target"] = torch.randn(5, 1), torch.randn(5, 1)
    out = loss_fn(td)
    p = F.log_softmax(actor(td.select("tokens", "length").clone())["logits"], -1)
    q = F.log_softmax(reference(td.select("tokens", "length").clone())["logits"], -1)
    kl = (p.exp() * (p - q)).sum(-1).mean()
    torch.testing.assert_close(out["loss_kl_ref"], 0.2 * kl)
    out["loss_kl_ref"].backward()
    assert all(p.grad is None for p in ref_lm.parameters())
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in lm.parameters())
    assert not any(n.startswith("_reference") for n, _ in loss_fn.named_parameters())


def test_reward_model_short_run_learns_the_rule():
    """Pairs of random sequences, preferred by the count of ``a`` (the example's rule)."""
    ex = _example()
    tok = CharTokenizer(ex.ALPHABET)
    g = torch.Generator().manual_seed(0)
    n = 600
    length = torch.randint(5, ex.MAX_LENGTH, (n, 1), generator=g)
    tokens = torch.randint(3, tok.vocab_size, (n, ex.MAX_LENGTH), generator=g)
    tokens[:, 0] = tok.bos_token_id
    tokens[torch.arange(ex.MAX_LENGTH) >= length] = tok.pad_token_id
    seqs = TensorDict(
        tokens=tokens,
        length=length,
        prompt_length=torch.ones(n, 1, dtype=torch.long),
        batch_size=[n],
    )
    pairs = ex.preferences(seqs, tok.encode("a")[0])
    chosen_a = ex.rule_score(
        TensorDict(
            **pairs["chosen"], prompt_length=torch.ones(len(pairs), 1), batch_size=pairs.shape
        ),
        3,
    )
    rejected_a = ex.rule_score(
        TensorDict(
            **pairs["rejected"], prompt_length=torch.ones(len(pairs), 1), batch_size=pairs.shape
        ),
        3,
    )
    assert (chosen_a > rejected_a).all()  # the known rule
    torch.manual_seed(0)
    rm = RewardModel(TinyCausalLM(tok.vocab_size, ex.MAX_LENGTH, hidden=16, n_layer=1))
    cut = int(0.8 * len(pairs))
    ex.train_reward_model(rm, pairs[:cut], 150, g)
    with torch.no_grad():
        assert BradleyTerryLoss(rm)(pairs[cut:])["accuracy"].item() > 0.8


@pytest.mark.parametrize("kl", ["reward", "loss"])
def test_kl_penalized_ppo_short_run(kl):
    """Two PPO iterations in the text env: the policy moves, the reference does not."""
    ex = _example()
    tokens, _ = ex.tiny_setup()
    lm = TinyCausalLM(tokens.vocab_size, ex.MAX_LENGTH, hidden=16, n_layer=1)
    reference, actor = token_actor(lm), token_actor(copy.deepcopy(lm))
    critic = token_critic(copy.deepcopy(lm))
    before = [p.clone() for p in actor.parameters()]
    frozen = [p.clone() for p in lm.parameters()]
    rule = lambda t, n: t.eq(3).sum(-1).float()  # noqa: E731
    history = ex.finetune(
        actor, reference, critic, rule, tokens, kl=kl, beta=0.1, iters=2, seed=0, envs=8
    )
    assert len(history) == 2 and all(h == h for h in history)
    assert any(not torch.equal(a, b) for a, b in zip(actor.parameters(), before))
    assert all(torch.equal(a, b) for a, b in zip(lm.parameters(), frozen))


@pytest.mark.slow
def test_rlhf_example_reaches_its_figures():
    """The whole example (full budgets), KL in the reward and as a loss term."""
    ex = _example()
    for kl in ("reward", "loss"):
        info = ex.main(seed=1, kl=kl)
        assert info["rm_accuracy"] >= 0.9, info
        assert info["score_policy"] > info["score_reference"] + 1.0, info
        assert info["kl"] < info["kl_bound"], info


def test_hugging_face_model_and_local_tokenizer_run_the_pipeline():
    pytest.importorskip(
        "transformers",
        reason="transformers is not installed (pip install 'torchrl-lite[transformers]')",
    )
    ex = _example()
    tokens, new_lm = ex.hf_setup()
    assert tokens.encode("abc") == CharTokenizer(ex.ALPHABET).encode("abc")
    torch.manual_seed(0)
    lm = new_lm()
    logits, hidden = lm(torch.ones(2, 5, dtype=torch.long))
    assert logits.shape == (2, 5, tokens.vocab_size) and hidden.shape == (2, 5, 32)
    g = torch.Generator().manual_seed(0)
    ex.pretrain(lm, ex.corpus(tokens, 64, g), tokens.pad_token_id, 3, g)
    reference = token_actor(lm)
    seqs = ex.sample_sequences(reference, tokens, 16, 0)
    assert (seqs["length"] > seqs["prompt_length"]).all()
    pairs = ex.preferences(seqs, tokens.encode("a")[0])
    rm = RewardModel(new_lm())
    ex.train_reward_model(rm, pairs, 2, g)
    actor, critic = token_actor(copy.deepcopy(lm)), token_critic(copy.deepcopy(lm))
    history = ex.finetune(
        actor, reference, critic, rm, tokens, kl="loss", beta=0.1, iters=1, seed=0, envs=4
    )
    assert len(history) == 1 and history[0] == history[0]


@pytest.mark.slow
def test_hugging_face_pipeline_end_to_end():
    pytest.importorskip(
        "transformers",
        reason="transformers is not installed (pip install 'torchrl-lite[transformers]')",
    )
    ex = _example()
    info = ex.main(seed=0, kl="loss", hf=True)
    assert info["rm_accuracy"] >= 0.9 and info["score_policy"] > info["score_reference"], info
