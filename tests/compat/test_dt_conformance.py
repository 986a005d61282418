"""TorchRL's decision-transformer pieces as its DT scripts use them."""

import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.envs import GymEnv, Reward2GoTransform, TransformedEnv


def _trajs():
    g = torch.Generator().manual_seed(0)
    reward = torch.randn(2, 5, 1, generator=g)
    done = torch.zeros(2, 5, 1, dtype=torch.bool)
    done[0, 1] = done[0, 4] = done[1, 4] = True  # two episodes in row 0, one in row 1
    return TensorDict({"next": {"reward": reward, "done": done}}, [2, 5])


def test_reward2go_matches_a_plain_loop_per_episode():
    data = _trajs()
    r2g = Reward2GoTransform(
        gamma=0.9,
        in_keys=[("next", "reward"), "reward"],  # the root "reward" is absent: skipped
        out_keys=[("next", "return_to_go"), "return_to_go"],
    )
    out = r2g.inv(data)
    expected = torch.zeros(2, 5)
    for b in range(2):
        g = 0.0
        for t in reversed(range(5)):
            if data["next", "done"][b, t]:
                g = 0.0
            g = float(data["next", "reward"][b, t]) + 0.9 * g
            expected[b, t] = g
    torch.testing.assert_close(out["next", "return_to_go"].squeeze(-1), expected)
    assert r2g(out) is out  # sampling: already there


def test_reward2go_refuses_envs_unfinished_episodes_and_missing_entries():
    with pytest.raises(ValueError, match="cannot run inside an env"):
        TransformedEnv(GymEnv("Pendulum-v1"), Reward2GoTransform())
    data = _trajs()
    data["next", "done"][1] = False
    with pytest.raises(RuntimeError, match="never end"):
        Reward2GoTransform().inv(data)
    with pytest.raises(KeyError, match="none of the reward entries"):
        Reward2GoTransform(in_keys=["r"]).inv(_trajs())
    with pytest.raises(ValueError, match="2 in_keys but 1 out_keys"):
        Reward2GoTransform(in_keys=["a", "b"], out_keys=["c"])


CONFIG = dict(n_embd=16, n_layer=1, n_head=1, n_inner=32, activation="relu",
              n_positions=60, resid_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip


def test_dt_actors_take_torchrls_config_and_respect_causality():
    from torchrl_lite.modules import DTActor, OnlineDTActor

    torch.manual_seed(0)
    actor = DTActor(state_dim=4, action_dim=2, transformer_config=CONFIG).eval()
    obs, act, rtg = torch.randn(3, 10, 4), torch.randn(3, 10, 2), torch.randn(3, 10, 1)
    out = actor(obs, act, rtg)
    assert out.shape == (3, 10, 2)
    # the prediction at step t sees steps <= t only (and not the action at t)
    later = obs.clone()
    later[:, 6:] += 1.0
    act2 = act.clone()
    act2[:, 5:] += 1.0
    torch.testing.assert_close(actor(later, act2, rtg)[:, :6], out[:, :6])
    assert not torch.allclose(actor(later, act, rtg)[:, 6:], out[:, 6:])
    online = OnlineDTActor(4, 2, CONFIG)
    loc, scale = online(obs, act, rtg)
    assert loc.shape == scale.shape == (3, 10, 2)
    assert bool((scale >= torch.exp(torch.tensor(-5.0)) - 1e-6).all())
    assert bool((scale <= torch.exp(torch.tensor(2.0)) + 1e-6).all())
    with pytest.raises(ValueError, match=r"unknown entries \['n_embed'\]"):
        DTActor(4, 2, {"n_embed": 8})


def test_inference_wrapper_masks_the_old_context_and_keeps_the_last_step():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.modules import DecisionTransformerInferenceWrapper

    seen = {}

    def spy(observation, action, return_to_go):
        seen.update(obs=observation.clone(), act=action.clone(), rtg=return_to_go.clone())
        return action * 2 + 1

    module = TensorDictModule(spy, ["observation_cat", "action_cat", "return_to_go_cat"],
                              ["action"])  # fmt: skip
    policy = DecisionTransformerInferenceWrapper(policy=module, inference_context=3)
    policy.set_tensor_keys(observation="observation_cat", action="action_cat",
                           return_to_go="return_to_go_cat")  # fmt: skip
    td = TensorDict(observation_cat=torch.ones(2, 8, 4), action_cat=torch.ones(2, 8, 2),
                    return_to_go_cat=torch.arange(8.0).expand(2, 8).unsqueeze(-1),
                    batch_size=[2])  # fmt: skip
    out = policy(td)
    assert seen["obs"][:, :5].abs().sum() == 0 and bool((seen["obs"][:, 5:] == 1).all())
    assert seen["act"][:, :6].abs().sum() == 0 and bool((seen["act"][:, 6:] == 1).all())
    assert out["action"].shape == (2, 2) and bool((out["action"] == 3).all())
    assert out["return_to_go_cat"].flatten().tolist() == [7.0, 7.0]
    assert bool((out["observation_cat"] == 1).all())  # the unmasked window comes back
    with pytest.raises(KeyError, match="accepted"):
        policy.set_tensor_keys(reward="r")
    with pytest.raises(ValueError, match="inference_context must be >= 1"):
        DecisionTransformerInferenceWrapper(module, inference_context=0)


def test_v04_exploration_mode_names_are_aliases():
    from tensordict.nn import TensorDictModule

    from torchrl_lite.envs.utils import (
        ExplorationType,
        exploration_type,
        set_exploration_mode,
        set_exploration_type,
    )
    from torchrl_lite.modules import ProbabilisticActor, TanhNormal

    assert set_exploration_mode is set_exploration_type
    with set_exploration_mode("random"):
        assert exploration_type() == ExplorationType.RANDOM
    module = TensorDictModule(lambda x: (x, x.exp()), ["observation"], ["loc", "scale"])
    actor = ProbabilisticActor(module, in_keys=["loc", "scale"], distribution_class=TanhNormal,
                               default_interaction_mode="random", cache_dist=False)  # fmt: skip
    td = TensorDict(observation=torch.zeros(500, 1), batch_size=[500])
    # outside any exploration block the actor samples (the random default), not the mode
    assert actor(td)["action"].std() > 0.1


def test_target_return_modes_reduce_and_constant():
    from torchrl_lite.envs import TargetReturn

    runs = {}
    for mode in ("reduce", "constant"):
        env = TransformedEnv(GymEnv("CartPole-v1"), TargetReturn(10.0, out_keys=["return_to_go"],
                                                                 mode=mode))  # fmt: skip
        env.set_seed(0)
        runs[mode] = env.rollout(3, break_when_any_done=False)["next", "return_to_go"].flatten()
    assert runs["reduce"].tolist() == [9.0, 8.0, 7.0]  # CartPole pays 1 per step
    assert runs["constant"].tolist() == [10.0, 10.0, 10.0]
    with pytest.raises(ValueError, match="mode must be 'reduce' or 'constant', got 'sum'"):
        TargetReturn(10.0, mode="sum")
