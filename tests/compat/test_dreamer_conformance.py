"""TorchRL's Dreamer call shapes (its example script's): TensorDict world model, env, losses.

The script wires an RSSM prior/posterior into ``RSSMRollout``, wraps encoder, rollout,
decoder and reward model in a ``WorldModelWrapper``, imagines in
``DreamerEnv(world_model=...)`` and trains with ``DreamerModelLoss(world_model)``,
``DreamerActorLoss(actor, value, env)`` and ``DreamerValueLoss(value, ...)``.
"""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModule,
    TensorDictSequential,
)
from torch import nn

from torchrl_lite.data import Bounded, Unbounded
from torchrl_lite.envs import (
    DeviceCastTransform,
    DreamerDecoder,
    DreamerEnv,
    GymEnv,
    TensorDictPrimer,
    TransformedEnv,
)
from torchrl_lite.envs.model_based.dreamer import DreamerEnv as OurDreamerEnv
from torchrl_lite.modules import (
    MLP,
    DreamerActor,
    IndependentNormal,
    ObsDecoder,
    RSSMPosterior,
    RSSMPrior,
    RSSMRollout,
    TanhNormal,
    WorldModelWrapper,
)
from torchrl_lite.modules.models.dreamer import RSSMPrior as OurPrior
from torchrl_lite.objectives.dreamer import (
    DreamerActorLoss,
    DreamerModelLoss,
    DreamerValueLoss,
    gaussian_kl,
)

S, D, H = 3, 6, 8  # state, belief, hidden sizes


def test_device_cast_moves_a_sample_and_renames_keys():
    td = TensorDict(obs=torch.ones(2), other=torch.zeros(2), batch_size=[])
    out = DeviceCastTransform("cpu", in_keys=["obs"], out_keys=["obs_dev"])(td)
    torch.testing.assert_close(out["obs_dev"], torch.ones(2))
    assert "obs" in out.keys()  # the source entry stays, as in TorchRL
    env = TransformedEnv(GymEnv("Pendulum-v1"), DeviceCastTransform("cpu"))
    assert env.rollout(2)["next", "observation"].device == torch.device("cpu")


def test_device_cast_to_another_device_inside_an_env_names_the_fix():
    with pytest.raises(ValueError, match=r"build it with device='meta'"):
        TransformedEnv(GymEnv("Pendulum-v1"), DeviceCastTransform("meta"))


def test_plain_env_append_transform_returns_a_transformed_env():
    env = GymEnv("Pendulum-v1").append_transform(TensorDictPrimer(state=Unbounded((S,))))
    assert isinstance(env, TransformedEnv)
    same = env.append_transform(TensorDictPrimer(belief=Unbounded((D,))))
    assert same is env and set(env.observation_spec.keys()) >= {"state", "belief"}


def test_torchrl_rssm_prior_is_our_network_under_torchrl_arguments():
    spec = Bounded(-1.0, 1.0, (2,))
    torch.manual_seed(0)
    theirs = RSSMPrior(action_spec=spec, hidden_dim=H, rnn_hidden_dim=D, state_dim=S, scale_lb=0.2)
    torch.manual_seed(0)
    ours = OurPrior(2, state_dim=S, belief_dim=D, hidden=H, min_std=0.2)
    assert isinstance(theirs, OurPrior) and type(ours) is OurPrior
    args = (torch.randn(4, S), torch.randn(4, D), torch.randn(4, 2))
    torch.manual_seed(1)
    out_theirs = theirs(*args)
    torch.manual_seed(1)
    for a, b in zip(out_theirs, ours(*args)):
        torch.testing.assert_close(a, b)


def test_lazy_posterior_and_decoder_read_their_input_size():
    post = RSSMPosterior(hidden_dim=H, state_dim=S)
    mean, std, state = post(torch.zeros(5, D), torch.zeros(5, 7))
    assert state.shape == (5, S) and bool((std >= 0.1).all())
    assert ObsDecoder(channels=2)(torch.zeros(5, S), torch.zeros(5, D)).shape == (5, 3, 64, 64)
    with pytest.raises(ValueError, match="num_layers=4"):
        ObsDecoder(channels=2, num_layers=3)


def test_dreamer_actor_scale_is_the_bias_at_zero():
    actor = DreamerActor(2, depth=1, num_cells=4)
    nn.init.zeros_(actor.backbone[-1].weight)
    nn.init.zeros_(actor.backbone[-1].bias)
    loc, scale = actor(torch.randn(3, S), torch.randn(3, D))
    torch.testing.assert_close(loc, torch.zeros(3, 2))
    torch.testing.assert_close(scale, torch.full((3, 2), 5.0))


def _world_model(action_spec):
    prior = RSSMPrior(action_spec=action_spec, hidden_dim=H, rnn_hidden_dim=D, state_dim=S)
    post = RSSMPosterior(hidden_dim=H, state_dim=S)
    rollout = RSSMRollout(
        TensorDictModule(
            prior, ["state", "belief", "action"],
            [("next", "prior_mean"), ("next", "prior_std"), "_", ("next", "belief")],
        ),
        TensorDictModule(
            post, [("next", "belief"), ("next", "encoded_latents")],
            [("next", "posterior_mean"), ("next", "posterior_std"), ("next", "state")],
        ),
    )  # fmt: skip
    encoder = MLP(out_features=5, depth=1, num_cells=H)
    decoder = MLP(out_features=3, depth=1, num_cells=H)
    reward = MLP(out_features=1, depth=1, num_cells=H)
    transition = TensorDictSequential(
        TensorDictModule(encoder, [("next", "observation")], [("next", "encoded_latents")]),
        rollout,
        TensorDictModule(decoder, [("next", "state"), ("next", "belief")], [("next", "reco_observation")]),
    )  # fmt: skip
    reward_model = TensorDictModule(
        reward, [("next", "state"), ("next", "belief")], [("next", "reward")]
    )
    return WorldModelWrapper(transition, reward_model), prior, reward


def _batch(b=2, t=4):
    return TensorDict(
        state=torch.zeros(b, t, S), belief=torch.zeros(b, t, D), action=torch.rand(b, t, 1) * 2 - 1,
        next=TensorDict(observation=torch.randn(b, t, 3), reward=torch.randn(b, t, 1), batch_size=[b, t]),
        batch_size=[b, t],
    )  # fmt: skip


def test_rssm_rollout_chains_each_steps_posterior_into_the_next():
    real = GymEnv("Pendulum-v1")
    world_model, prior, _ = _world_model(real.action_spec)
    torch.manual_seed(0)
    out = world_model[0](_batch())
    nxt = out["next"]
    # step t + 1 starts from step t's posterior state and belief
    torch.testing.assert_close(out["state"][:, 1:], nxt["state"][:, :-1])
    torch.testing.assert_close(out["belief"][:, 1:], nxt["belief"][:, :-1])
    # its prior belief is the GRU step from there (an independent call of the network)
    _, _, _, belief = prior(out["state"][:, 2], out["belief"][:, 2], out["action"][:, 2])
    torch.testing.assert_close(nxt["belief"][:, 2], belief)


def test_torchrl_losses_and_imagination_env():
    real = GymEnv("Pendulum-v1").append_transform(
        TensorDictPrimer(state=Unbounded((S,)), belief=Unbounded((D,)))
    )
    world_model, prior, reward = _world_model(real.action_spec)
    model_loss = DreamerModelLoss(world_model)
    assert isinstance(model_loss, DreamerModelLoss) and type(model_loss) is not DreamerModelLoss
    model_loss.set_keys(pixels="observation", reco_pixels="reco_observation")
    torch.manual_seed(0)
    batch = _batch()
    losses, filled = model_loss(batch)
    nxt = filled["next"]
    kl = gaussian_kl(
        nxt["posterior_mean"], nxt["posterior_std"], nxt["prior_mean"], nxt["prior_std"]
    )
    torch.testing.assert_close(losses["loss_model_kl"], kl.clamp_min(3.0).mean().reshape(1))
    reco = (nxt["observation"] - nxt["reco_observation"]).pow(2).sum()
    torch.testing.assert_close(losses["loss_model_reco"], reco.reshape(1))
    assert losses["loss_model_reco"].requires_grad and not filled["next", "state"].requires_grad

    transition = TensorDictModule(
        prior, ["state", "belief", "action"], ["_", "_", "state", "belief"]
    )
    reward_model = ProbabilisticTensorDictSequential(
        TensorDictModule(reward, ["state", "belief"], ["loc"]),
        ProbabilisticTensorDictModule(["loc"], ["reward"], distribution_class=IndependentNormal,
                                      distribution_kwargs={"scale": 1.0, "event_dim": 1}),
    )  # fmt: skip
    env = DreamerEnv(world_model=WorldModelWrapper(transition, reward_model), prior_shape=(S,),
                     belief_shape=(D,))  # fmt: skip
    assert isinstance(env, OurDreamerEnv)
    env.set_specs_from_env(real)
    actor = ProbabilisticTensorDictSequential(
        TensorDictModule(DreamerActor(1, depth=1, num_cells=H), ["state", "belief"], ["loc", "scale"]),
        ProbabilisticTensorDictModule(["loc", "scale"], ["action"], distribution_class=TanhNormal,
                                      distribution_kwargs={"tanh_loc": True}),
    )  # fmt: skip
    value = ProbabilisticTensorDictSequential(
        TensorDictModule(MLP(out_features=1, depth=1, num_cells=H), ["state", "belief"], ["loc"]),
        ProbabilisticTensorDictModule(["loc"], ["state_value"], distribution_class=IndependentNormal,
                                      distribution_kwargs={"scale": 1.0, "event_dim": 1}),
    )  # fmt: skip
    value(TensorDict(state=torch.zeros(1, S), belief=torch.zeros(1, D), batch_size=[1]))  # lazy
    actor_loss = DreamerActorLoss(actor, value, env, imagination_horizon=3, discount_loss=True)
    actor_loss.make_value_estimator(gamma=0.9, lmbda=0.8)
    actor_out, imagined = actor_loss(filled)
    assert imagined.batch_size == (8, 3)
    target = imagined["lambda_target"]
    weight = torch.tensor([1.0, 0.9, 0.81]).reshape(1, 3, 1)
    torch.testing.assert_close(actor_out["loss_actor"], -(target * weight).sum((-2, -1)).mean())
    actor_out["loss_actor"].backward()
    assert all(p.grad is None for p in prior.parameters())  # the world model is held out
    assert any(p.grad is not None for p in actor.parameters())

    value_loss = DreamerValueLoss(value, discount_loss=False, gamma=0.9)
    out, _ = value_loss(imagined)
    assert out["loss_value"].requires_grad
    with pytest.raises(ValueError, match="TD\\(lambda\\)"):
        actor_loss.make_value_estimator("gae")


def test_dreamer_decoder_decodes_imagined_steps():
    real = GymEnv("Pendulum-v1").append_transform(
        TensorDictPrimer(state=Unbounded((S,)), belief=Unbounded((D,)))
    )
    prior = RSSMPrior(action_spec=real.action_spec, hidden_dim=H, rnn_hidden_dim=D, state_dim=S)
    transition = TensorDictModule(
        prior, ["state", "belief", "action"], ["_", "_", "state", "belief"]
    )
    reward = TensorDictModule(nn.Linear(S, 1), ["state"], ["reward"])
    decoder = TensorDictModule(nn.Linear(S + D, 3), ["state", "belief"], ["reco_observation"])
    decoder.module = MLP(in_features=S + D, out_features=3, depth=0)
    env = DreamerEnv(world_model=WorldModelWrapper(transition, reward), prior_shape=(S,),
                     belief_shape=(D,), obs_decoder=decoder)  # fmt: skip
    env.set_specs_from_env(real)
    start = TensorDict(state=torch.randn(2, S), belief=torch.randn(2, D), batch_size=[2])
    rollout = env.append_transform(DreamerDecoder()).rollout(2, auto_reset=False, tensordict=start)
    expected = decoder.module(torch.cat([rollout["next", "state"], rollout["next", "belief"]], -1))
    torch.testing.assert_close(rollout["next", "reco_observation"], expected)


def test_python_gru_and_lstm_cells_match_torchs():
    from torchrl_lite.modules.tensordict_module.rnn import GRUCell, LSTMCell

    gru, ref_gru = GRUCell(3, 4), nn.GRUCell(3, 4)
    ref_gru.load_state_dict(gru.state_dict())
    x, h = torch.randn(5, 3), torch.randn(5, 4)
    torch.testing.assert_close(gru(x, h), ref_gru(x, h))
    torch.testing.assert_close(gru(x[0]), ref_gru(x[0]))  # unbatched, zero state
    lstm, ref_lstm = LSTMCell(3, 4), nn.LSTMCell(3, 4)
    ref_lstm.load_state_dict(lstm.state_dict())
    state = (torch.randn(5, 4), torch.randn(5, 4))
    for a, b in zip(lstm(x, state), ref_lstm(x, state)):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="1-D or 2-D input"):
        gru(torch.zeros(2, 2, 3))
