"""Dreamer's three losses: world model, actor (through imagination) and value.

Paper: Hafner et al. 2020, "Dream to Control: Learning Behaviors by Latent Imagination",
https://arxiv.org/abs/1912.01603; KL balancing from DreamerV2 (Hafner et al. 2021,
https://arxiv.org/abs/2010.02193).

On a replay batch of slices ``[B, T]`` (image ``o_t``, action ``a_t``, next image
``o_{t+1}``, reward ``r_t``), with the RSSM started at ``h_0 = 0``, ``s_0 ~ q(. | h_0, e(o_0))``:

- ``loss_model_reco = mean_{b,t} 1/2 ||dec(s_{t+1}, h_{t+1}) - o_{t+1}||^2`` (a unit Gaussian's
  negative log-likelihood, summed over the pixels, or the entries of a state observation);
- ``loss_model_reward = mean 1/2 (rew(s_{t+1}, h_{t+1}) - r_t)^2``;
- ``loss_model_kl = max(mean KL(q || p), free_nats)``; with ``kl_balance = a``:
  ``a max(mean KL(sg(q) || p), free) + (1 - a) max(mean KL(q || sg(p)), free)``.

From the posterior states (detached), the actor rolls out ``H`` steps in a
:class:`~torchrl_lite.envs.DreamerEnv`; ``V^lambda_t = r_t + gamma ((1 - lambda) v(s_{t+1})
+ lambda V^lambda_{t+1})``, ``V^lambda_{H-1} = r_{H-1} + gamma v(s_H)``:

- ``loss_actor = -mean(w_t (V^lambda_t + eta H_t))``, ``w_t = gamma^t``, gradients through
  the dynamics into the actor only (the world model and the value model are frozen for this
  term); ``H_t = -log pi(a_t | s_t)`` is a one-sample entropy estimate and ``eta`` the
  ``entropy_coef`` (0: Dreamer; DreamerV2/V3 add the bonus);
- ``loss_value = mean(w_t 1/2 (v(sg(s_t)) - sg(V^lambda_t))^2)``.

With ``delay_value`` (DreamerV2) the returns bootstrap with a slow copy of ``v``.

Each term trains only its own networks, so one optimizer (a parameter group per part)
can step on their sum: :class:`DreamerLoss` runs the three.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite.envs.model_based import BELIEF, STATE, DreamerEnv
from torchrl_lite.modules.models.dreamer import scale_image
from torchrl_lite.modules.tensordict_module.exploration import (
    ExplorationType,
    set_exploration_type,
)
from torchrl_lite.objectives.common import LossModule, _LossKeyError
from torchrl_lite.objectives.value.functional import vec_td_lambda_return_estimate

__all__ = [
    "DreamerActorLoss",
    "DreamerLoss",
    "DreamerModelLoss",
    "DreamerValueLoss",
    "gaussian_kl",
    "kl_balanced_free_nats",
    "lambda_returns",
]

LAMBDA_RETURN = "lambda_return"
DISCOUNT_WEIGHT = "discount_weight"


def gaussian_kl(q_mean, q_std, p_mean, p_std) -> torch.Tensor:
    """``KL(N(q_mean, q_std) || N(p_mean, p_std))`` of diagonal Gaussians ``[*B, S]`` -> ``[*B]``."""
    var_ratio = (q_std / p_std) ** 2
    mahalanobis = ((q_mean - p_mean) / p_std) ** 2
    return 0.5 * (var_ratio + mahalanobis - 1 - var_ratio.log()).sum(-1)


def kl_balanced_free_nats(
    post_mean, post_std, prior_mean, prior_std, balance: float | None = None, free_nats=3.0
) -> torch.Tensor:
    """Dreamer's KL term (scalar) from posterior and prior parameters ``[*B, S]``.

    ``balance=None``: ``max(mean KL(q || p), free_nats)`` (Dreamer); a number ``a``:
    ``a max(mean KL(sg(q) || p), free) + (1 - a) max(mean KL(q || sg(p)), free)``
    (DreamerV2's balancing: the prior learns faster than the posterior with ``a > 0.5``).

    Example:
        >>> m, s = torch.zeros(2, 3), torch.ones(2, 3)
        >>> kl_balanced_free_nats(m + 1, s, m, s, free_nats=0.0)  # 3 dims x 1/2
        tensor(1.5000)
    """
    if balance is None:
        return gaussian_kl(post_mean, post_std, prior_mean, prior_std).mean().clamp_min(free_nats)
    if not 0.0 <= balance <= 1.0:
        raise ValueError(f"kl_balance must lie in [0, 1] (DreamerV2: 0.8), got {balance}.")
    lhs = gaussian_kl(post_mean.detach(), post_std.detach(), prior_mean, prior_std).mean()
    rhs = gaussian_kl(post_mean, post_std, prior_mean.detach(), prior_std.detach()).mean()
    return balance * lhs.clamp_min(free_nats) + (1 - balance) * rhs.clamp_min(free_nats)


def lambda_returns(reward, next_value, gamma: float, lmbda: float) -> torch.Tensor:
    """Dreamer's ``V^lambda`` ``[*B, H, 1]`` from rewards and next values ``[*B, H, 1]``.

    The TD(lambda) return without episode ends, bootstrapped with ``v(s_H)`` at the
    horizon (vectorized over time).

    Example:
        >>> lambda_returns(torch.ones(1, 2, 1), torch.full((1, 2, 1), 10.0), 0.5, 0.5)[0, :, 0]
        tensor([5., 6.])
    """
    done = torch.zeros(reward.shape, dtype=torch.bool, device=reward.device)
    return vec_td_lambda_return_estimate(gamma, lmbda, next_value, reward, done)


def _torchrl_form(cls, base: type, torchrl: bool):
    """TorchRL's call form of ``base`` builds its subclass ``TorchRL<base>`` (defined in
    ``dreamer_compat.py``, which the package imports)."""
    if cls is base and torchrl:
        name = f"TorchRL{base.__name__}"
        cls = next(c for c in base.__subclasses__() if c.__name__ == name)
    return nn.Module.__new__(cls)


@contextmanager
def _frozen(*modules: nn.Module):
    """Parameters without ``requires_grad`` inside the block: gradients flow *through* the
    modules (to their inputs) but do not accumulate in them."""
    params = [p for m in modules for p in m.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def _features(td: TensorDictBase) -> torch.Tensor:
    return torch.cat([td.get(STATE), td.get(BELIEF)], -1)  # [*B, S + D]


class DreamerModelLoss(LossModule):
    """The world-model loss on slices ``[B, T]`` (see the module docstring).

    Writes the detached posterior states and beliefs ``[B, T, S]``, ``[B, T, D]`` into the
    batch at ``("next", "state")`` and ``("next", "belief")`` (the actor's start states).

    Args:
        encoder, decoder: an :class:`~torchrl_lite.modules.ObsEncoder` and
            :class:`~torchrl_lite.modules.ObsDecoder`.
        prior, posterior: :class:`~torchrl_lite.modules.RSSMPrior`, ``RSSMPosterior``.
        reward_head: features -> reward (:class:`~torchrl_lite.modules.RewardHead`).
        pixels_key: the image entry (root and ``"next"``), uint8 ``[B, T, C, 64, 64]``.
        kl_balance: None (Dreamer) or DreamerV2's balance (0.8).
        free_nats: the KL is not pushed below this many nats.
        kl_scale, reco_scale, reward_scale: weights of the three terms.

    Example:
        >>> from torchrl_lite.modules import ObsDecoder, ObsEncoder, RewardHead, RSSMPosterior, RSSMPrior
        >>> enc = ObsEncoder(3, depth=2)
        >>> loss = DreamerModelLoss(enc, ObsDecoder(12, 3, 2), RSSMPrior(1, 4, 8, 8),
        ...     RSSMPosterior(8, enc.out_features, 4, 8), RewardHead(12, 8))
        >>> px = torch.zeros(2, 3, 3, 64, 64, dtype=torch.uint8)
        >>> batch = TensorDict(pixels=px, action=torch.zeros(2, 3, 1),
        ...     next=TensorDict(pixels=px, reward=torch.zeros(2, 3, 1), batch_size=[2, 3]),
        ...     batch_size=[2, 3])
        >>> sorted(loss(batch).keys())
        ['kl', 'loss_model_kl', 'loss_model_reco', 'loss_model_reward']
        >>> batch["next", "state"].shape
        torch.Size([2, 3, 4])
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: DreamerModelLoss(world_model)
        return _torchrl_form(cls, DreamerModelLoss, len(args) + ("world_model" in kwargs) == 1)

    def __init__(
        self, encoder, decoder, prior, posterior, reward_head, *, pixels_key: str = K.PIXELS,
        kl_balance: float | None = None, free_nats: float = 3.0, kl_scale: float = 1.0,
        reco_scale: float = 1.0, reward_scale: float = 1.0,
    ):  # fmt: skip
        super().__init__()
        for name, module in (
            ("encoder", encoder), ("decoder", decoder), ("prior", prior),
            ("posterior", posterior), ("reward_head", reward_head),
        ):  # fmt: skip
            self.register_network(name, module)
        if kl_balance is not None and not 0.0 <= kl_balance <= 1.0:
            raise ValueError(f"kl_balance must lie in [0, 1] (DreamerV2: 0.8), got {kl_balance}.")
        self.pixels_key, self.kl_balance, self.free_nats = pixels_key, kl_balance, free_nats
        self.kl_scale, self.reco_scale, self.reward_scale = kl_scale, reco_scale, reward_scale

    @property
    def in_keys(self) -> list:
        return [self.pixels_key, K.ACTION, (K.NEXT, self.pixels_key), (K.NEXT, K.REWARD)]

    @property
    def out_keys(self) -> list:
        return ["loss_model_kl", "loss_model_reco", "loss_model_reward", "kl"]

    def observe(self, pixels, next_pixels, action):
        """Filter a batch of slices: ``(prior, posterior params, states, beliefs)``, ``[B, T, .]``."""
        belief = torch.zeros(*pixels.shape[:1], self.prior.belief_dim, device=pixels.device)
        state = self.posterior(belief, self.encoder(pixels[:, 0]))[2]  # s_0 ~ q(. | 0, e(o_0))
        embed = self.encoder(next_pixels)  # [B, T, E]
        steps = []
        for t in range(action.shape[1]):  # the RSSM is recurrent: one step at a time
            p_mean, p_std, _, belief = self.prior(state, belief, action[:, t])
            q_mean, q_std, state = self.posterior(belief, embed[:, t])
            steps.append((p_mean, p_std, q_mean, q_std, state, belief))
        return [torch.stack(x, 1) for x in zip(*steps)]  # each [B, T, .]

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        td = tensordict
        if td.batch_dims != 2:
            raise ValueError(
                f"DreamerModelLoss needs slices of batch [B, T], got {list(td.batch_size)}; "
                "reshape the sample (e.g. sample.reshape(-1, slice_len))."
            )
        next_pixels = td.get((K.NEXT, self.pixels_key))  # [B, T, C, H, W]
        p_mean, p_std, q_mean, q_std, states, beliefs = self.observe(
            td.get(self.pixels_key), next_pixels, td.get(K.ACTION)
        )
        features = torch.cat([states, beliefs], -1)  # [B, T, S + D]
        error = self.decoder(features) - scale_image(next_pixels)  # [B, T, C, H, W] or [B, T, D]
        reco = 0.5 * error.pow(2).flatten(2).sum(-1).mean()  # summed over the observation
        reward = 0.5 * (self.reward_head(features) - td.get((K.NEXT, K.REWARD))).pow(2).mean()
        kl = kl_balanced_free_nats(q_mean, q_std, p_mean, p_std, self.kl_balance, self.free_nats)
        td.set((K.NEXT, STATE), states.detach())
        td.set((K.NEXT, BELIEF), beliefs.detach())
        raw_kl = gaussian_kl(q_mean, q_std, p_mean, p_std).mean().detach()
        return TensorDict(
            loss_model_kl=self.kl_scale * kl, loss_model_reco=self.reco_scale * reco,
            loss_model_reward=self.reward_scale * reward, kl=raw_kl, batch_size=[],
        )  # fmt: skip


class DreamerActorLoss(LossModule):
    """The actor loss: maximise lambda-returns of imagined rollouts (module docstring).

    ``forward(batch)`` reads the posterior states written by :class:`DreamerModelLoss` at
    ``("next", "state")`` / ``("next", "belief")`` and returns ``(losses, imagined)``: the
    imagined rollout ``[N, H]`` with ``"lambda_return"`` and ``"discount_weight"`` (detached),
    what :class:`DreamerValueLoss` reads.

    Args:
        actor: a probabilistic actor reading ``"state"`` and ``"belief"`` (rsample).
        value_model: features ``[*B, S + D]`` -> value ``[*B, 1]``.
        model_env: the :class:`~torchrl_lite.envs.DreamerEnv` to imagine in.
        imagination_horizon: ``H``.
        gamma, lmbda: discount and lambda of the returns.
        entropy_coef: ``eta``, the weight of the entropy bonus; above 0 the actor must write
            its log-probability (``ProbabilisticActor(..., return_log_prob=True)``).
        detach_actor_inputs: the actor reads ``sg(s_t)`` in imagination, as in Dreamer's
            code: an action's gradient reaches it through the dynamics, rewards and values
            only, not through the later actions' dependence on the state. False: the
            full pathwise gradient.
        delay_value: bootstrap the lambda-returns (the actor's objective and the value
            model's regression target) with a slow copy of the value model at
            ``target_value_model`` (DreamerV2's target critic), refreshed by a
            :class:`~torchrl_lite.objectives.HardUpdate` on this loss (DreamerV2: every 100
            updates). Gradients still flow through it to the imagined states.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import ProbabilisticActor, RewardHead, RSSMPrior, TanhNormal
        >>> net = nn.Sequential(nn.Linear(8, 2), NormalParamExtractor())
        >>> actor = ProbabilisticActor(TensorDictModule(net, ["belief"], ["loc", "scale"]),
        ...     ["loc", "scale"], distribution_class=TanhNormal)
        >>> env = DreamerEnv(RSSMPrior(1, 4, 8, 8), RewardHead(12, 8), Bounded(-1.0, 1.0, (1,)))
        >>> loss = DreamerActorLoss(actor, RewardHead(12, 8), env, imagination_horizon=3)
        >>> batch = TensorDict(next=TensorDict(state=torch.zeros(2, 5, 4),
        ...     belief=torch.zeros(2, 5, 8), batch_size=[2, 5]), batch_size=[2, 5])
        >>> out, imagined = loss(batch)
        >>> imagined.batch_size, out["loss_actor"].shape
        (torch.Size([10, 3]), torch.Size([]))
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: an env stepped by a world model
        env = args[2] if len(args) > 2 else kwargs.get("model_based_env", kwargs.get("model_env"))
        torchrl = "model_based_env" in kwargs or hasattr(env, "world_model")
        return _torchrl_form(cls, DreamerActorLoss, torchrl)

    def __init__(
        self, actor, value_model: nn.Module, model_env: DreamerEnv, *,
        imagination_horizon: int = 15, gamma: float = 0.99, lmbda: float = 0.95,
        entropy_coef: float = 0.0, detach_actor_inputs: bool = False,
        delay_value: bool = False,
    ):  # fmt: skip
        super().__init__()
        if not isinstance(model_env, DreamerEnv):
            raise TypeError(f"model_env must be a DreamerEnv, got {type(model_env).__name__}.")
        if not entropy_coef >= 0.0:
            raise ValueError(f"entropy_coef must be >= 0 (DreamerV3: 3e-4), got {entropy_coef}.")
        self.entropy_coef = float(entropy_coef)
        self.detach_actor_inputs = bool(detach_actor_inputs)
        self.register_network("actor", actor)
        self.value_model = value_model  # trained by DreamerValueLoss
        self.delay_value = bool(delay_value)
        if self.delay_value:  # target_value_model: a frozen copy, refreshed by HardUpdate
            self.register_network("value_model", value_model, create_target=True)
        self.model_env = model_env  # its modules are trained by DreamerModelLoss
        self.horizon, self.gamma, self.lmbda = int(imagination_horizon), gamma, lmbda

    @property
    def in_keys(self) -> list:
        return [(K.NEXT, STATE), (K.NEXT, BELIEF)]

    @property
    def out_keys(self) -> list:
        return ["loss_actor", "imagined_reward", "entropy"]

    def _act(self, td: TensorDictBase) -> TensorDictBase:
        if not self.detach_actor_inputs:
            return self.actor(td)
        return td.update(self.actor(td.select(STATE, BELIEF).detach()).exclude(STATE, BELIEF))

    def forward(self, tensordict: TensorDictBase):
        nxt = tensordict.get(K.NEXT)
        if STATE not in nxt.keys() or BELIEF not in nxt.keys():
            raise _LossKeyError(
                "DreamerActorLoss starts from the posterior states at ('next', 'state') and "
                "('next', 'belief'): run DreamerModelLoss on the batch first."
            )
        start = nxt.select(STATE, BELIEF).reshape(-1).detach()  # [N]
        with _frozen(self.model_env.prior, self.model_env.reward_head, self.value_model):
            with set_exploration_type(ExplorationType.RANDOM):
                imagined = self.model_env.rollout(
                    self.horizon, self._act, auto_reset=False, tensordict=start
                )  # [N, H]
            bootstrap = self.target_value_model if self.delay_value else self.value_model
            next_value = bootstrap(_features(imagined.get(K.NEXT)))  # [N, H, 1]
        reward = imagined.get((K.NEXT, K.REWARD))  # [N, H, 1]
        returns = lambda_returns(reward, next_value, self.gamma, self.lmbda)  # [N, H, 1]
        steps = torch.arange(self.horizon, device=reward.device, dtype=reward.dtype)
        weight = (self.gamma**steps).reshape(1, -1, 1).expand_as(returns)  # [N, H, 1]
        loss = -(weight * returns).mean()
        out = TensorDict(imagined_reward=reward.detach().mean(), batch_size=[])
        log_prob = imagined.get(K.SAMPLE_LOG_PROB, None)  # [N, H]
        if log_prob is not None:
            out.set("entropy", -log_prob.detach().mean())
            if self.entropy_coef > 0:
                loss = loss + self.entropy_coef * (weight[..., 0] * log_prob).mean()
        elif self.entropy_coef > 0:
            raise _LossKeyError(
                f"DreamerActorLoss(entropy_coef={self.entropy_coef}) needs the actor's "
                f"log-probability at {K.SAMPLE_LOG_PROB!r}: build the actor with "
                "ProbabilisticActor(..., return_log_prob=True)."
            )
        out.set("loss_actor", loss)
        imagined = imagined.exclude(K.NEXT).detach()  # root states s_0..s_{H-1}
        imagined.set(LAMBDA_RETURN, returns.detach())
        imagined.set(DISCOUNT_WEIGHT, weight)
        return out, imagined


class DreamerValueLoss(LossModule):
    """The value loss: regress ``v(s_t)`` on the imagined lambda-returns (module docstring).

    Args:
        value_model: features ``[*B, S + D]`` -> value ``[*B, 1]``.

    Example:
        >>> from torchrl_lite.modules import RewardHead
        >>> imagined = TensorDict(state=torch.zeros(4, 3, 2), belief=torch.zeros(4, 3, 5),
        ...     lambda_return=torch.ones(4, 3, 1), discount_weight=torch.ones(4, 3, 1),
        ...     batch_size=[4, 3])
        >>> DreamerValueLoss(RewardHead(7, 8))(imagined)["loss_value"].shape
        torch.Size([])
    """

    def __new__(cls, *args, **kwargs):  # TorchRL's form: a TensorDict value model
        model = args[0] if args else kwargs.get("value_model")
        torchrl = (
            len(args) > 1 or bool(kwargs.keys() - {"value_model"}) or hasattr(model, "in_keys")
        )
        return _torchrl_form(cls, DreamerValueLoss, torchrl)

    def __init__(self, value_model: nn.Module):
        super().__init__()
        self.register_network("value_model", value_model)

    @property
    def in_keys(self) -> list:
        return [STATE, BELIEF, LAMBDA_RETURN, DISCOUNT_WEIGHT]

    @property
    def out_keys(self) -> list:
        return ["loss_value"]

    def forward(self, imagined: TensorDictBase) -> TensorDict:
        value = self.value_model(_features(imagined).detach())  # [N, H, 1]
        target = imagined.get(LAMBDA_RETURN).detach()
        weight = imagined.get(DISCOUNT_WEIGHT)
        return TensorDict(loss_value=(weight * 0.5 * (value - target) ** 2).mean(), batch_size=[])


class DreamerLoss(LossModule):
    """The three Dreamer losses as one module: its ``loss_*`` terms can be summed.

    Each term trains only its own networks (see the module docstring), so one optimizer
    with a parameter group per part (model, actor, value; Dreamer's learning rates differ)
    steps on the sum.

    Args:
        model_loss: a :class:`DreamerModelLoss`.
        actor_loss: a :class:`DreamerActorLoss` imagining with the same prior/reward head.
        value_loss: a :class:`DreamerValueLoss` with the actor loss's value model.
        slice_len: the replay sample ``[B * T]`` is reshaped to ``[B, slice_len]``.

    Example:
        >>> from tensordict.nn import NormalParamExtractor, TensorDictModule
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import (ObsDecoder, ObsEncoder, ProbabilisticActor,
        ...     RewardHead, RSSMPosterior, RSSMPrior, TanhNormal)
        >>> enc, prior, reward, value = ObsEncoder(3, 2), RSSMPrior(1, 4, 8, 8), RewardHead(12, 8), RewardHead(12, 8)
        >>> model = DreamerModelLoss(enc, ObsDecoder(12, 3, 2), prior,
        ...     RSSMPosterior(8, enc.out_features, 4, 8), reward)
        >>> net = nn.Sequential(nn.Linear(8, 2), NormalParamExtractor())
        >>> actor = ProbabilisticActor(TensorDictModule(net, ["belief"], ["loc", "scale"]),
        ...     ["loc", "scale"], distribution_class=TanhNormal)
        >>> imagine = DreamerEnv(prior, reward, Bounded(-1.0, 1.0, (1,)))
        >>> loss = DreamerLoss(model, DreamerActorLoss(actor, value, imagine, imagination_horizon=3),
        ...     DreamerValueLoss(value), slice_len=4)
        >>> px = torch.zeros(8, 3, 64, 64, dtype=torch.uint8)
        >>> sample = TensorDict(pixels=px, action=torch.zeros(8, 1), next=TensorDict(pixels=px,
        ...     reward=torch.zeros(8, 1), batch_size=[8]), batch_size=[8])
        >>> sorted(k for k in loss(sample).keys() if k.startswith("loss_"))
        ['loss_actor', 'loss_model_kl', 'loss_model_reco', 'loss_model_reward', 'loss_value']
    """

    def __init__(self, model_loss, actor_loss, value_loss, slice_len: int | None = None):
        super().__init__()
        if actor_loss.value_model is not value_loss.value_model:
            raise ValueError("DreamerLoss: actor_loss and value_loss must share the value model.")
        self.model_loss, self.actor_loss, self.value_loss = model_loss, actor_loss, value_loss
        self.slice_len = slice_len

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        td = tensordict
        if self.slice_len is not None and td.batch_dims == 1:
            td = td.reshape(-1, self.slice_len)  # [B, T]
        model = self.model_loss(td)
        actor, imagined = self.actor_loss(td)
        value = self.value_loss(imagined)
        return TensorDict({**model.to_dict(), **actor.to_dict(), **value.to_dict()}, batch_size=[])
