"""DrQLoss with K / M augmented copies against a hand-written DrQ critic loss; prioritized
replay weights and TD errors through DrQLoss."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torch import nn

from torchrl_lite.envs import RandomShift
from torchrl_lite.modules import MLP, ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import DrQLoss, SACLoss

B, C, H, W, F_DIM = 6, 2, 8, 8, 5


def _loss(**kwargs):
    torch.manual_seed(0)
    encoder = nn.Sequential(nn.Flatten(-3), nn.Linear(C * H * W, F_DIM), nn.Tanh())
    actor = ProbabilisticActor(
        TensorDictModule(
            nn.Sequential(nn.Linear(F_DIM, 2), NormalParamExtractor()),
            ["features"],
            ["loc", "scale"],
        ),
        ["loc", "scale"],
        distribution_class=TanhNormal,
    )
    qvalue = ValueOperator(MLP(in_features=F_DIM + 1, out_features=1, num_cells=[8]),
                           ["features", "action"])  # fmt: skip
    sac = SACLoss(actor, qvalue, action_spec=None, gamma=0.9, loss_function="l2", alpha_init=0.5)
    loss = DrQLoss(encoder, sac, pixels_key="pixels", **kwargs)
    with torch.no_grad():  # targets that differ from the online networks
        for p in [*loss.target_encoder.parameters(), *sac.target_qvalue_network_params.values(
            True, True)]:  # fmt: skip
            p.add_(0.1 * torch.randn_like(p))
    return loss


def _batch():
    g = torch.Generator().manual_seed(1)
    terminated = torch.tensor([[False], [True], [False], [False], [True], [False]])
    return TensorDict(
        {"pixels": torch.rand(B, C, H, W, generator=g), "action": torch.rand(B, 1, generator=g) * 2 - 1,
         "next": {"pixels": torch.rand(B, C, H, W, generator=g),
                  "reward": torch.randn(B, 1, generator=g), "done": terminated,
                  "terminated": terminated}},
        batch_size=[B],
    )  # fmt: skip


def _roll(x):
    """A deterministic 'augmentation' that differs per copy: copy i rolled by i + 1."""
    return torch.stack([torch.roll(x[i], i + 1, dims=-1) for i in range(x.shape[0])])


def _hand_drq(loss, batch, n_k, n_m, seed):
    """DrQ's critic (Kostrikov et al. 2020, eq. 3-4) written out with the loss's networks."""
    sac = loss.sac_loss
    actor, alpha = sac.actor_network, sac.log_alpha.exp().detach()

    def q(net, z, a):  # [2, *B, 1]: the two Q-networks (an ensemble module)
        td = TensorDict(features=z, action=a.expand(*z.shape[:-1], 1), batch_size=z.shape[:-1])
        return net(td)["state_action_value"]

    obs = [torch.roll(batch["pixels"], m + 1, dims=-1) for m in range(n_m)]
    nxt = [torch.roll(batch["next", "pixels"], k + 1, dims=-1) for k in range(n_k)]
    z = [loss.encoder(o) for o in obs]
    torch.manual_seed(seed)
    actor.get_dist(TensorDict(features=z[0].detach(), batch_size=[B])).rsample()  # actor's draw
    with torch.no_grad():
        z_next = torch.stack([loss.target_encoder(o) for o in nxt])  # [K, B, F]
        dist = actor.get_dist(TensorDict(features=z_next, batch_size=[n_k, B]))
        a_next = dist.sample()
        log_p = dist.log_prob(a_next).reshape(n_k, B, 1)
        soft = q(sac.target_qvalue_network, z_next, a_next).min(0).values  # [K, B, 1]
        v = (soft - alpha * log_p).mean(0)  # [B, 1]: the mean over the K copies
        y = batch["next", "reward"] + 0.9 * (~batch["next", "terminated"]) * v
    errors = torch.stack([(q(sac.qvalue_network, z[m], batch["action"]) - y) ** 2
                          for m in range(n_m)])  # [M, 2, B, 1]  # fmt: skip
    return errors.mean((0, 2, 3)).sum(), y  # each Q-network's mean, summed


@pytest.mark.parametrize("n_k, n_m", [(2, 2), (3, 1), (1, 2)])
def test_drq_k_m_critic_loss_matches_the_hand_written_one(n_k, n_m):
    loss = _loss(augment=_roll, num_target_augs=n_k, num_q_augs=n_m)
    batch = _batch()
    torch.manual_seed(5)
    out = loss(batch)
    reference, _ = _hand_drq(loss, batch, n_k, n_m, seed=5)
    torch.testing.assert_close(out["loss_qvalue"], reference)
    params = list(loss.encoder.parameters())  # the encoder learns from every Q copy
    got = torch.autograd.grad(out["loss_qvalue"], params, retain_graph=True)
    want = torch.autograd.grad(reference, params)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    assert batch["td_error"].shape == (B,)  # written back for prioritized replay
    actor_grads = torch.autograd.grad(out["loss_actor"], params, allow_unused=True)
    assert all(g is None or g.abs().sum() == 0 for g in actor_grads)


def test_drq_with_one_copy_equals_the_loss_on_a_batch_augmented_beforehand():
    batch = _batch()
    torch.manual_seed(3)
    inside = _loss(augment=_roll)(batch.clone())
    before = batch.clone()
    before["pixels"] = torch.roll(batch["pixels"], 1, dims=-1)
    before["next", "pixels"] = torch.roll(batch["next", "pixels"], 1, dims=-1)
    torch.manual_seed(3)
    outside = _loss()(before)
    for key in ("loss_qvalue", "loss_actor", "loss_alpha", "td_error"):
        torch.testing.assert_close(inside[key], outside[key])


@pytest.mark.parametrize("augment", [None, _roll])
def test_drq_weights_the_critic_by_the_prioritized_buffers_weights(augment):
    kwargs = {"augment": augment, "num_q_augs": 2} if augment else {}
    batch = _batch()
    torch.manual_seed(3)
    plain = _loss(**kwargs)(batch.clone())
    weighted = batch.clone().set("_weight", torch.full((B,), 2.0))
    torch.manual_seed(3)
    doubled = _loss(**kwargs)(weighted)
    torch.testing.assert_close(doubled["loss_qvalue"], 2 * plain["loss_qvalue"])
    assert weighted["td_error"].shape == (B,)


def test_drq_random_shift_copies_differ_and_bad_counts_are_refused():
    loss = _loss(augment=RandomShift(2), num_target_augs=2, num_q_augs=2)
    assert loss.augment.__self__.pad == 2  # RandomShift's augment method
    out = loss(_batch())
    assert torch.isfinite(out["loss_qvalue"])
    with pytest.raises(ValueError, match=r"num_target_augs=2, num_q_augs=1 need augment="):
        _loss(num_target_augs=2)
    with pytest.raises(ValueError, match=r"num_q_augs must be an int >= 1, got 0"):
        _loss(augment=_roll, num_q_augs=0)
