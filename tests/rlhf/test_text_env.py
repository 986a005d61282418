"""TextGenerationEnv: specs, the episode's end, the reward at the end, bad input."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.envs.custom.text import TextGenerationEnv, check_vocabularies
from torchrl_lite.envs.utils import check_env_specs
from torchrl_lite.modules.models.language import RewardModel, TinyCausalLM

V, EOS = 7, 2


def _env(**kwargs):
    kwargs.setdefault("reward_fn", lambda tokens, length: tokens.eq(3).sum(-1).float())
    return TextGenerationEnv([[1, 4], [1, 5, 6]], V, 6, EOS, **kwargs)


def test_text_env_specs():
    check_env_specs(_env())
    check_env_specs(_env(batch_size=[3], seed=0))


def test_text_env_appends_tokens_and_ends_at_eos_with_the_reward():
    env = _env(seed=0)
    td = env.reset()
    prompt_len = int(td["length"])
    tokens = td["tokens"].clone()
    for i, action in enumerate([3, 3, EOS]):
        td["action"] = torch.tensor(action)
        td = env.step(td)
        nxt = td["next"]
        tokens[prompt_len + i] = action
        assert torch.equal(nxt["tokens"], tokens) and int(nxt["length"]) == prompt_len + i + 1
        last = action == EOS
        assert bool(nxt["done"]) == last and bool(nxt["terminated"]) == last
        assert not bool(nxt["truncated"])
        # the reward is the sequence's score on the last step, 0 before
        assert nxt["reward"].item() == (2.0 if last else 0.0)
        td = nxt.clone()


def test_text_env_truncates_at_max_length():
    env = _env(seed=1, batch_size=[4])
    td = env.rollout(4, lambda td: td.set("action", torch.full((4,), 4)), break_when_any_done=False)
    done = td["next", "done"].squeeze(-1)  # [4, T]
    assert done.any(-1).all()
    for row in range(4):
        t = int(done[row].float().argmax())  # the first episode's end
        assert td["next", "length"][row, t].item() == 6  # max_length, no EOS played
        assert td["next", "truncated"][row, t] and not td["next", "terminated"][row, : t + 1].any()
        assert td["next", "reward"][row, :t].abs().sum() == 0


def test_text_env_partial_reset_keeps_the_other_sequences():
    env = _env(seed=2, batch_size=[2])
    td = env.reset()
    td["action"] = torch.tensor([EOS, 4])
    nxt = env.step(td)["next"]
    nxt["_reset"] = nxt["done"].clone()
    out = env.reset(nxt.clone())
    assert int(out["length"][1]) == int(nxt["length"][1])  # unchanged
    assert torch.equal(out["tokens"][1], nxt["tokens"][1])
    assert int(out["length"][0]) in (2, 3)  # a fresh prompt


def test_text_env_bad_input():
    with pytest.raises(ValueError, match=r"prompt 1 has 6 tokens, not shorter than max_length=6"):
        TextGenerationEnv([[1, 3], [1, 3, 3, 3, 3, 3]], V, 6, EOS)
    with pytest.raises(ValueError, match=r"prompt 0 has token ids \[9\] outside \[0, 7\)"):
        TextGenerationEnv([[1, 9]], V, 6, EOS)
    with pytest.raises(ValueError, match="prompt 0 is empty"):
        TextGenerationEnv([[]], V, 6, EOS)
    rm = RewardModel(TinyCausalLM(V + 1, 6, hidden=8, n_layer=1))
    with pytest.raises(
        ValueError, match=r"different vocabularies \(policy 7, reward_model 8 tokens\)"
    ):
        TextGenerationEnv([[1, 3]], V, 6, EOS, reward_fn=rm)
    with pytest.raises(ValueError, match="policy 7, reward_model 8"):
        check_vocabularies(policy=TinyCausalLM(V, 6, hidden=8, n_layer=1), reward_model=rm)
    td = TensorDict(tokens=torch.ones(2, 6, dtype=torch.long), batch_size=[2])
    with pytest.raises(TypeError, match="long token ids"):
        TinyCausalLM(V, 6, hidden=8, n_layer=1)(td["tokens"].float())
