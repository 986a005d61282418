"""Seed 000's off-policy algorithms over the library's losses: ``SAC`` (``SACLoss``),
``TD3`` (``TD3Loss``), ``DDPG`` (``DDPGLoss``), ``DQN`` / ``DDQN`` (``DQNLoss``).

PyTorchRL's names map to the recipes' settings: ``lr_pi`` / ``lr_q`` / ``lr_alpha`` (or one
``lr``) -> Adam step sizes, ``polyak`` = ``1 - tau`` (soft target update), ``start_steps``
= ``init_random_frames``, ``update_every`` = env steps per env between two rounds of
updates, ``num_updates`` = gradient steps per round, ``mini_batch_size`` = ``batch_size``.
The defaults are the recipes' (their Pendulum / CartPole settings). For the Scheme,
``num_mini_batch == num_updates`` and ``num_epochs == 1``.
"""

from __future__ import annotations

import inspect

import torch

from torchrl_lite.agent._factory import Factory, check_int
from torchrl_lite.agent.algos.base import Algorithm
from torchrl_lite.modules import EGreedyModule, SafeSequential
from torchrl_lite.objectives import DDPGLoss, DQNLoss, HardUpdate, SACLoss, SoftUpdate
from torchrl_lite.recipes import ddpg as ddpg_recipe
from torchrl_lite.recipes import dqn as dqn_recipe
from torchrl_lite.recipes import sac as sac_recipe
from torchrl_lite.recipes import td3 as td3_recipe

__all__ = ["DDPG", "DDQN", "DQN", "SAC", "TD3"]

_SAC, _TD3, _DDPG, _DQN = (
    sac_recipe.Config(),
    td3_recipe.Config(),
    ddpg_recipe.Config(),
    dqn_recipe.Config(),
)


def _polyak(owner: str, polyak) -> float:
    if not 0.0 <= float(polyak) < 1.0:
        raise ValueError(f"{owner}: polyak must lie in [0, 1) (tau = 1 - polyak), got {polyak!r}.")
    return float(polyak)


class _OffPolicy(Algorithm):
    on_policy = False
    _needs_q = True

    def __init__(self, device, actor, *, gamma, num_updates, update_every, start_steps,
                 mini_batch_size, max_grad_norm):  # fmt: skip
        super().__init__(device, actor, max_grad_norm)
        name = type(self).__name__
        if self._needs_q and getattr(actor, "q", None) is None:
            raise TypeError(
                f"{name} needs an actor with a Q-network: "
                f"OffPolicyActor.create_factory(..., algorithm_name={name!r})."
            )
        self.gamma = float(gamma)
        self.num_updates = check_int(name, "num_updates", num_updates)
        self.update_every = check_int(name, "update_every", update_every)
        self.mini_batch_size = check_int(name, "mini_batch_size", mini_batch_size)
        self.start_steps = check_int(name, "start_steps", start_steps, minimum=0)
        self.num_epochs = 1

    @property
    def num_mini_batch(self) -> int:
        return self.num_updates

    @classmethod
    def create_factory(cls, **kwargs):
        """``algo_factory(device, actor) -> algorithm``; keywords as the class's (checked now:
        a misspelled name raises TypeError naming the valid ones)."""
        valid = [
            n
            for n in inspect.signature(cls.__init__).parameters
            if n not in ("self", "device", "actor")
        ]
        unknown = sorted(set(kwargs) - set(valid))
        if unknown:
            raise TypeError(
                f"{cls.__name__}.create_factory: unknown hyperparameter(s) {unknown}. "
                f"Valid: {', '.join(valid)}."
            )
        return Factory(cls, kwargs)

    def _groups(self, lrs: dict) -> list[dict]:
        """Adam parameter groups by network: ``pi`` (actor), ``q`` (critics), ``alpha``."""
        groups: dict[str, list] = {k: [] for k in lrs}
        for name, p in self.loss_module.named_parameters():
            kind = (
                "pi"
                if name.startswith("actor_network.")
                else "alpha"
                if name == "log_alpha"
                else "q"
            )
            groups[kind].append(p)
        return [{"params": ps, "lr": lrs[k], "name": k} for k, ps in groups.items() if ps]

    def _set_group_lr(self, group_name: str):
        def setter(value):
            for optimizer in self.optimizers.values():
                for group in optimizer.param_groups:
                    if group.get("name") == group_name:
                        group["lr"] = float(value)

        return setter

    def _parameter_setters(self) -> dict:
        return {
            **super()._parameter_setters(),
            "gamma": self._set_gamma,
            "num_updates": self._set_attr("num_updates"),
            "mini_batch_size": self._set_attr("mini_batch_size"),
        }

    def _set_gamma(self, value) -> None:
        self.gamma = float(value)
        self.loss_module.make_value_estimator(gamma=self.gamma)

    def use_n_step_returns(self, n_step: int) -> None:
        """Learn from windows of up to ``n_step`` steps (called by ``NStepReplayBuffer``); each
        transition's ``"steps_to_next_obs"`` ``k`` sets its bootstrap's ``gamma ** k``."""
        self.n_step = int(n_step)


class SAC(_OffPolicy):
    """SAC with a learned temperature (https://arxiv.org/abs/1812.05905) over ``SACLoss``.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OffPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OffPolicyActor.create_factory(*spaces, algorithm_name="SAC")("cpu")
        >>> algo = SAC.create_factory(lr_q=1e-3, polyak=0.995)("cpu", actor)
        >>> algo.num_mini_batch, algo.start_steps
        (10, 500)
    """

    def __init__(self, device, actor, lr=_SAC.lr, lr_pi=None, lr_q=None, lr_alpha=None,  # noqa: PLR0913 (seed 000's signature)
                 gamma=_SAC.gamma, polyak=1 - _SAC.tau, num_updates=_SAC.frames_per_batch,
                 update_every=_SAC.frames_per_batch, start_steps=_SAC.init_random_frames,
                 mini_batch_size=_SAC.batch_size, initial_alpha=1.0, target_update_interval=1,
                 max_grad_norm=None):  # fmt: skip
        super().__init__(device, actor, gamma=gamma, num_updates=num_updates,
                         update_every=update_every, start_steps=start_steps,
                         mini_batch_size=mini_batch_size, max_grad_norm=max_grad_norm)  # fmt: skip
        self.polyak = _polyak("SAC", polyak)
        self.target_update_interval = check_int(
            "SAC", "target_update_interval", target_update_interval
        )
        self.loss_module = SACLoss(actor.policy, actor.q, num_qvalue_nets=2, gamma=self.gamma,
                                   alpha_init=initial_alpha, action_spec=actor.action_spec)  # fmt: skip
        lrs = {"pi": lr_pi or lr, "q": lr_q or lr, "alpha": lr_alpha or lr}
        self.optimizers = {"optimizer": torch.optim.Adam(self._groups(lrs))}
        self.target_updater = SoftUpdate(self.loss_module, tau=1 - self.polyak)
        self.acting_policy = actor.policy

    def _update_targets(self) -> None:
        if (self.num_gradient_updates + 1) % self.target_update_interval == 0:
            self.target_updater.step()

    def _parameter_setters(self) -> dict:
        return {**super()._parameter_setters(), "lr_pi": self._set_group_lr("pi"),
                "lr_q": self._set_group_lr("q"), "lr_alpha": self._set_group_lr("alpha"),
                "polyak": self._set_tau}  # fmt: skip

    def _set_tau(self, polyak) -> None:
        self.polyak = _polyak(type(self).__name__, polyak)
        self.target_updater.tau = 1 - self.polyak


class TD3(_OffPolicy):
    """TD3 (https://arxiv.org/abs/1802.09477) over the TD3 recipe's ``TD3Loss``: the actor
    and targets move every ``policy_delay``-th update; Gaussian exploration noise in
    ``acting_policy``.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OffPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OffPolicyActor.create_factory(*spaces, algorithm_name="TD3")("cpu")
        >>> TD3.create_factory()("cpu", actor).policy_delay
        2
    """

    def __init__(self, device, actor, lr=_TD3.lr, lr_pi=None, lr_q=None, gamma=_TD3.gamma,  # noqa: PLR0913 (seed 000's signature)
                 polyak=1 - _TD3.tau, num_updates=_TD3.frames_per_batch,
                 update_every=_TD3.frames_per_batch, start_steps=_TD3.init_random_frames,
                 mini_batch_size=_TD3.batch_size, policy_delay=_TD3.policy_delay,
                 exploration_noise=_TD3.exploration_noise, policy_noise=_TD3.policy_noise,
                 noise_clip=_TD3.noise_clip, max_grad_norm=None):  # fmt: skip
        super().__init__(device, actor, gamma=gamma, num_updates=num_updates,
                         update_every=update_every, start_steps=start_steps,
                         mini_batch_size=mini_batch_size, max_grad_norm=max_grad_norm)  # fmt: skip
        self.polyak = _polyak("TD3", polyak)
        self.policy_delay = check_int("TD3", "policy_delay", policy_delay)
        cfg = td3_recipe.Config(gamma=self.gamma, exploration_noise=exploration_noise,
                                policy_noise=policy_noise, noise_clip=noise_clip)  # fmt: skip
        self.loss_module = td3_recipe.make_loss(cfg, actor.policy, actor.q, actor.action_spec)
        groups = self._groups({"pi": lr_pi or lr, "q": lr_q or lr})
        self.optimizers = {g["name"]: torch.optim.Adam([g]) for g in groups}
        self.target_updater = SoftUpdate(self.loss_module, tau=1 - self.polyak)
        self.acting_policy = td3_recipe.make_exploration_policy(
            cfg, actor.policy, actor.action_spec
        )

    def _delayed(self) -> bool:
        return self.num_gradient_updates % self.policy_delay == 0

    def _step_optimizers(self) -> None:
        if self._delayed():
            self.optimizers["pi"].step()
        self.optimizers["q"].step()

    def _update_targets(self) -> None:
        if self._delayed():
            self.target_updater.step()

    def _parameter_setters(self) -> dict:
        return {**super()._parameter_setters(), "lr_pi": self._set_group_lr("pi"),
                "lr_q": self._set_group_lr("q"), "polyak": SAC._set_tau.__get__(self)}  # fmt: skip


class DDPG(_OffPolicy):
    """DDPG (https://arxiv.org/abs/1509.02971) over ``DDPGLoss`` with target actor and
    critic (Polyak-averaged) and Gaussian exploration noise, as the DDPG recipe.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OffPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (3,)), gymnasium.spaces.Box(-2, 2, (1,))
        >>> actor = OffPolicyActor.create_factory(*spaces, algorithm_name="DDPG")("cpu")
        >>> type(DDPG.create_factory()("cpu", actor).loss_module).__name__
        'DDPGLoss'
    """

    def __init__(self, device, actor, lr=_DDPG.lr, lr_pi=None, lr_q=None, gamma=_DDPG.gamma,  # noqa: PLR0913 (seed 000's signature)
                 polyak=1 - _DDPG.tau, num_updates=_DDPG.frames_per_batch,
                 update_every=_DDPG.frames_per_batch, start_steps=_DDPG.init_random_frames,
                 mini_batch_size=_DDPG.batch_size, exploration_noise=_DDPG.exploration_noise,
                 max_grad_norm=None):  # fmt: skip
        super().__init__(device, actor, gamma=gamma, num_updates=num_updates,
                         update_every=update_every, start_steps=start_steps,
                         mini_batch_size=mini_batch_size, max_grad_norm=max_grad_norm)  # fmt: skip
        self.polyak = _polyak("DDPG", polyak)
        self.loss_module = DDPGLoss(actor.policy, actor.q, loss_function="l2", delay_actor=True,
                                    delay_value=True, gamma=self.gamma)  # fmt: skip
        self.optimizers = {
            "optimizer": torch.optim.Adam(self._groups({"pi": lr_pi or lr, "q": lr_q or lr}))
        }
        self.target_updater = SoftUpdate(self.loss_module, tau=1 - self.polyak)
        cfg = ddpg_recipe.Config(exploration_noise=exploration_noise)
        self.acting_policy = ddpg_recipe.make_exploration_policy(
            cfg, actor.policy, actor.action_spec
        )

    def _update_targets(self) -> None:
        self.target_updater.step()

    _parameter_setters = TD3._parameter_setters


class DQN(_OffPolicy):
    """DQN (https://www.nature.com/articles/nature14236) over ``DQNLoss`` (Huber loss, hard
    target copies every ``target_update_interval`` updates), epsilon-greedy collection.

    Epsilon goes linearly from ``initial_epsilon`` to ``final_epsilon`` over
    ``epsilon_annealing_steps`` gradient updates (the recipe's ``eps_frames`` in updates:
    16k frames at 64 updates per 256 frames = 4k updates), or, with ``epsilon_decay``, is
    multiplied by it after each update (PyTorchRL's schedule).
    ``get_weights`` carries epsilon to the collection workers.

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OffPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (4,)), gymnasium.spaces.Discrete(2)
        >>> actor = OffPolicyActor.create_factory(*spaces)("cpu")
        >>> DQN.create_factory()("cpu", actor).epsilon
        1.0
    """

    _needs_q = False
    double_dqn = False

    def __init__(self, device, actor, lr=_DQN.lr, gamma=_DQN.gamma,  # noqa: PLR0913 (seed 000's signature)
                 num_updates=_DQN.optim_steps_per_batch,
                 update_every=_DQN.frames_per_batch // _DQN.num_envs,
                 start_steps=_DQN.init_random_frames, mini_batch_size=_DQN.batch_size,
                 target_update_interval=_DQN.target_update_interval,
                 initial_epsilon=_DQN.eps_init, final_epsilon=_DQN.eps_end,
                 epsilon_annealing_steps=_DQN.eps_frames * _DQN.optim_steps_per_batch // _DQN.frames_per_batch,
                 epsilon_decay=None,
                 max_grad_norm=_DQN.max_grad_norm):  # fmt: skip
        super().__init__(device, actor, gamma=gamma, num_updates=num_updates,
                         update_every=update_every, start_steps=start_steps,
                         mini_batch_size=mini_batch_size, max_grad_norm=max_grad_norm)  # fmt: skip
        self.loss_module = DQNLoss(actor.policy, loss_function="smooth_l1", delay_value=True,
                                   double_dqn=self.double_dqn, gamma=self.gamma)  # fmt: skip
        self.optimizers = {"optimizer": torch.optim.Adam(self.loss_module.parameters(), lr=lr)}
        self.target_updater = HardUpdate(
            self.loss_module,
            value_network_update_interval=check_int(type(self).__name__, "target_update_interval", target_update_interval),
        )  # fmt: skip
        self.initial_epsilon, self.final_epsilon = float(initial_epsilon), float(final_epsilon)
        self.epsilon_annealing_steps = max(1, int(epsilon_annealing_steps))
        self.epsilon_decay = epsilon_decay
        self.explore = EGreedyModule(actor.action_spec, eps_init=initial_epsilon, eps_end=final_epsilon,
                                     annealing_num_steps=self.epsilon_annealing_steps)  # fmt: skip
        self.acting_policy = SafeSequential(actor.policy, self.explore)
        self._set_epsilon()

    @property
    def epsilon(self) -> float:
        return float(self.explore.eps)

    def _set_epsilon(self) -> None:
        n = self.num_gradient_updates
        if self.epsilon_decay is not None:
            eps = max(self.final_epsilon, self.initial_epsilon * float(self.epsilon_decay) ** n)
        else:
            fraction = min(1.0, n / self.epsilon_annealing_steps)
            eps = self.initial_epsilon + (self.final_epsilon - self.initial_epsilon) * fraction
        self.explore.eps.fill_(eps)

    def _update_targets(self) -> None:
        self.target_updater.step()

    def apply_gradients(self, grads=None) -> None:
        super().apply_gradients(grads)
        self._set_epsilon()  # a function of the update count

    def get_weights(self) -> dict:
        return {**super().get_weights(), "__epsilon__": self.explore.eps.detach().clone()}

    def set_weights(self, weights: dict) -> None:
        weights = dict(weights)
        eps = weights.pop("__epsilon__", None)
        super().set_weights(weights)
        if eps is not None:
            self.explore.eps.copy_(eps)

    def _extra_state(self) -> dict:
        return {"target_updater": self.target_updater.state_dict()}

    def _load_extra_state(self, state: dict) -> None:
        if "target_updater" in state:
            self.target_updater.load_state_dict(state["target_updater"])
        self._set_epsilon()

    def _parameter_setters(self) -> dict:
        return {**super()._parameter_setters(), "epsilon_decay": self._set_attr("epsilon_decay")}


class DDQN(DQN):
    """Double DQN (https://arxiv.org/abs/1509.06461): the online network picks the next
    action, the target network values it (``DQNLoss(double_dqn=True)``, the DQN recipe's).

    Example:
        >>> import gymnasium
        >>> from torchrl_lite.agent.actors import OffPolicyActor
        >>> spaces = gymnasium.spaces.Box(-1, 1, (4,)), gymnasium.spaces.Discrete(2)
        >>> DDQN.create_factory()("cpu", OffPolicyActor.create_factory(*spaces)("cpu")).double_dqn
        True
    """

    double_dqn = True
