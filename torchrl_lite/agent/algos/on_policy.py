"""Seed 000's on-policy algorithms: ``PPO`` (``ClipPPOLoss``) and ``A2C`` (``A2CLoss``).

These are adapters: ``create_factory(...)`` takes PyTorchRL's hyperparameter names (seed
000's scripts pass them), and its defaults are the recipes' (``torchrl_lite.recipes.ppo``
/ ``.a2c``), so ``PPO.create_factory()`` trains like ``torchrl-lite train ppo``. Adapter
names: ``clip_param`` is the loss's ``clip_epsilon``, ``value_loss_coef`` its
``critic_coef``, ``use_clipped_value_loss`` sets ``clip_value = clip_param``; ``gamma``
is read by the storage's advantage estimator. ``make_loss`` hands in a loss built
elsewhere instead: the command line's Scheme path passes the recipe's own ``make_loss``,
so the recipe's field names reach the loss unchanged.
"""

from __future__ import annotations

import torch

from torchrl_lite.agent._factory import Factory, check_int
from torchrl_lite.agent.algos.base import Algorithm
from torchrl_lite.objectives import A2CLoss, ClipPPOLoss
from torchrl_lite.recipes import a2c as a2c_recipe
from torchrl_lite.recipes import ppo as ppo_recipe

__all__ = ["A2C", "PPO"]

_PPO = ppo_recipe.Config()
_A2C = a2c_recipe.Config()


def _check_batches(name: str, num_mini_batch, mini_batch_size):
    if num_mini_batch is not None and mini_batch_size is not None:
        raise ValueError(
            f"{name}: give num_mini_batch ({num_mini_batch}) or mini_batch_size "
            f"({mini_batch_size}), not both."
        )
    for label, value in (("num_mini_batch", num_mini_batch), ("mini_batch_size", mini_batch_size)):
        if value is not None:
            check_int(name, label, value)


class _OnPolicy(Algorithm):
    on_policy = True

    def __init__(self, device, actor, *, lr, num_epochs, num_mini_batch, mini_batch_size,
                 max_grad_norm, gamma):  # fmt: skip
        super().__init__(device, actor, max_grad_norm)
        if getattr(actor, "value", None) is None:
            raise TypeError(
                f"{type(self).__name__} needs an actor with a value network (OnPolicyActor), "
                f"got {type(actor).__name__}."
            )
        _check_batches(type(self).__name__, num_mini_batch, mini_batch_size)
        if num_mini_batch is None and mini_batch_size is None:
            num_mini_batch = 1
        self.num_epochs = int(num_epochs)
        self.num_mini_batch = num_mini_batch
        self.mini_batch_size = mini_batch_size
        self.gamma = float(gamma)
        self.acting_policy = actor.policy

    def _make_optimizer(self, lr: float) -> None:
        self.optimizers = {"optimizer": torch.optim.Adam(self.loss_module.parameters(), lr=lr)}

    def _parameter_setters(self) -> dict:
        loss = self.loss_module
        return {
            **super()._parameter_setters(),
            "entropy_coef": self._set_buffer(loss.entropy_coef),
            "value_loss_coef": self._set_buffer(loss.critic_coef),
            "num_epochs": self._set_attr("num_epochs"),
            "gamma": self._set_attr("gamma"),
        }


class PPO(_OnPolicy):
    """PPO (clipped surrogate, https://arxiv.org/abs/1707.06347) over ``ClipPPOLoss``.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OnPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OnPolicyActor.create_factory(*spaces)("cpu")
        >>> algo = PPO.create_factory(lr=1e-4, num_mini_batch=4)("cpu", actor)
        >>> algo.num_mini_batch, type(algo.loss_module).__name__
        (4, 'ClipPPOLoss')
    """

    def __init__(self, device, actor, lr=_PPO.lr, num_epochs=_PPO.epochs,  # noqa: PLR0913 (seed 000's signature)
                 clip_param=_PPO.clip_epsilon, entropy_coef=_PPO.entropy_coef,
                 value_loss_coef=_PPO.critic_coef, max_grad_norm=_PPO.max_grad_norm,
                 num_mini_batch=None, mini_batch_size=None, use_clipped_value_loss=False,
                 gamma=_PPO.gamma, make_loss=None):  # fmt: skip
        super().__init__(device, actor, lr=lr, num_epochs=num_epochs,
                         num_mini_batch=num_mini_batch, mini_batch_size=mini_batch_size,
                         max_grad_norm=max_grad_norm, gamma=gamma)  # fmt: skip
        if make_loss is not None:  # ``(policy, value) -> loss``, e.g. the recipe's own
            self.loss_module = make_loss(actor.policy, actor.value)
        else:
            self.loss_module = ClipPPOLoss(
                actor.policy,
                actor.value,
                clip_epsilon=clip_param,
                entropy_bonus=entropy_coef > 0,
                entropy_coef=entropy_coef,
                critic_coef=value_loss_coef,
                normalize_advantage=True,  # as the recipe
                clip_value=clip_param if use_clipped_value_loss else None,
            )
        self._make_optimizer(lr)

    @classmethod
    def create_factory(cls, lr=_PPO.lr, num_epochs=_PPO.epochs, clip_param=_PPO.clip_epsilon,
                       entropy_coef=_PPO.entropy_coef, value_loss_coef=_PPO.critic_coef,
                       max_grad_norm=_PPO.max_grad_norm, num_mini_batch=None,
                       mini_batch_size=None, use_clipped_value_loss=False,
                       gamma=_PPO.gamma, make_loss=None):  # fmt: skip
        """``algo_factory(device, actor) -> PPO``. Without ``num_mini_batch`` and
        ``mini_batch_size``, minibatches of the recipe's ``mini_batch_size`` (64); with
        ``make_loss`` (a picklable ``(policy, value) -> loss``), that loss instead of one
        built from the loss settings here."""
        if num_mini_batch is None and mini_batch_size is None:
            mini_batch_size = _PPO.mini_batch_size
        _check_batches("PPO", num_mini_batch, mini_batch_size)
        return Factory(cls, dict(
            lr=lr, num_epochs=num_epochs, clip_param=clip_param, entropy_coef=entropy_coef,
            value_loss_coef=value_loss_coef, max_grad_norm=max_grad_norm,
            num_mini_batch=num_mini_batch, mini_batch_size=mini_batch_size,
            use_clipped_value_loss=use_clipped_value_loss, gamma=gamma, make_loss=make_loss,
        ))  # fmt: skip

    def _parameter_setters(self) -> dict:
        return {**super()._parameter_setters(), "clip_param": self._set_attr_of("clip_epsilon")}

    def _set_attr_of(self, attr: str):
        def setter(value):
            current = getattr(self.loss_module, attr)
            if isinstance(current, torch.Tensor):  # a buffer (ClipPPOLoss.clip_epsilon)
                current.fill_(float(value))
            else:
                setattr(self.loss_module, attr, float(value))

        return setter


class A2C(_OnPolicy):
    """A2C (https://arxiv.org/abs/1602.01783) over ``A2CLoss``: one gradient step per
    epoch over the whole batch by default.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OnPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> algo = A2C.create_factory()("cpu", OnPolicyActor.create_factory(*spaces)("cpu"))
        >>> algo.num_epochs, algo.num_mini_batch
        (1, 1)
    """

    def __init__(self, device, actor, lr=_A2C.lr, num_epochs=1, entropy_coef=_A2C.entropy_coef,
                 value_loss_coef=_A2C.critic_coef, max_grad_norm=_A2C.max_grad_norm,
                 num_mini_batch=1, mini_batch_size=None, gamma=_A2C.gamma,
                 lr_decay_updates=None, make_loss=None):  # fmt: skip
        self.lr, self.lr_decay_updates = float(lr), lr_decay_updates
        super().__init__(device, actor, lr=lr, num_epochs=num_epochs,
                         num_mini_batch=num_mini_batch, mini_batch_size=mini_batch_size,
                         max_grad_norm=max_grad_norm, gamma=gamma)  # fmt: skip
        if make_loss is not None:  # ``(policy, value) -> loss``, e.g. the recipe's own
            self.loss_module = make_loss(actor.policy, actor.value)
        else:
            self.loss_module = A2CLoss(
                actor.policy,
                actor.value,
                entropy_bonus=entropy_coef > 0,
                entropy_coef=entropy_coef,
                critic_coef=value_loss_coef,
                loss_critic_type="l2",  # as the recipe
            )
        self._make_optimizer(lr)

    @classmethod
    def create_factory(cls, lr=_A2C.lr, num_epochs=1, entropy_coef=_A2C.entropy_coef,
                       value_loss_coef=_A2C.critic_coef, max_grad_norm=_A2C.max_grad_norm,
                       num_mini_batch=1, mini_batch_size=None, gamma=_A2C.gamma,
                       lr_decay_updates=None, make_loss=None):  # fmt: skip
        """``algo_factory(device, actor) -> A2C``; with ``lr_decay_updates`` the step size
        decays linearly to zero over that many updates (the recipe's ``lr_decay``); with
        ``make_loss`` (a picklable ``(policy, value) -> loss``), that loss."""
        if mini_batch_size is not None:
            num_mini_batch = None
        _check_batches("A2C", num_mini_batch, mini_batch_size)
        return Factory(cls, dict(
            lr=lr, num_epochs=num_epochs, entropy_coef=entropy_coef,
            value_loss_coef=value_loss_coef, max_grad_norm=max_grad_norm,
            num_mini_batch=num_mini_batch, mini_batch_size=mini_batch_size, gamma=gamma,
            lr_decay_updates=lr_decay_updates, make_loss=make_loss,
        ))  # fmt: skip

    def _update_targets(self) -> None:  # after each optimizer step: the decayed step size
        if self.lr_decay_updates:
            done = (self.num_gradient_updates + 1) / self.lr_decay_updates
            self._set_lr(self.lr * max(0.0, 1.0 - done))
