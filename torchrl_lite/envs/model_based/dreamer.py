"""DreamerEnv: a learned world model as an env, for rolling out in imagination.

It follows the ``EnvBase`` contract (``reset``, ``step``, ``rollout``), but its state is the
model's latent state, carried in the TensorDict:

* ``"state"`` ``[*B, S]`` (stochastic) and ``"belief"`` ``[*B, D]`` (deterministic);
* ``step`` reads them and ``"action"`` ``[*B, A]`` and writes the prior's next state and
  belief, and the reward head's ``"reward"`` ``[*B, 1]`` under ``"next"``; imagined
  episodes never end (``done`` False).

Nothing is detached: gradients flow from imagined rewards back through the dynamics to
the actions (Dreamer's actor loss). Samples use torch's global RNG.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Composite, TensorSpec, Unbounded
from torchrl_lite.envs.common import EnvBase

__all__ = ["DreamerEnv", "STATE", "BELIEF"]

STATE = "state"
BELIEF = "belief"


class DreamerEnv(EnvBase):
    """Imagined steps of an RSSM world model (any leading batch: ``batch_locked`` False).

    Args:
        prior: an :class:`~torchrl_lite.modules.RSSMPrior`.
        reward_head: features ``[*B, S + D]`` -> reward ``[*B, 1]``.
        action_spec: the real env's action spec (without batch dims).
        device: where the tensors live.

    Example:
        >>> from torchrl_lite.data import Bounded
        >>> from torchrl_lite.modules import RewardHead, RSSMPrior
        >>> env = DreamerEnv(RSSMPrior(1, 4, 8, 8), RewardHead(12, 8), Bounded(-1.0, 1.0, (1,)))
        >>> start = TensorDict(state=torch.zeros(5, 4), belief=torch.zeros(5, 8), batch_size=[5])
        >>> env.rollout(3, auto_reset=False, tensordict=start)["next", "reward"].shape
        torch.Size([5, 3, 1])
    """

    batch_locked = False
    _requires_reset = False

    def __new__(cls, *args, **kwargs):
        # TorchRL's form, DreamerEnv(world_model, prior_shape, belief_shape, ...), builds
        # WorldModelDreamerEnv (envs/model_based/world_model.py)
        torchrl = {"world_model", "prior_shape"} & kwargs.keys() or (
            args and isinstance(args[0], TensorDictModuleBase)
        )
        if cls is DreamerEnv and torchrl:  # defined in world_model.py (the package imports it)
            cls = next(
                c for c in DreamerEnv.__subclasses__() if c.__name__ == "WorldModelDreamerEnv"
            )
        return super().__new__(cls)

    def __init__(
        self, prior: nn.Module, reward_head: nn.Module, action_spec: TensorSpec, device=None
    ):
        super().__init__(device=device, batch_size=[], spec_check="never")
        self.prior, self.reward_head = prior, reward_head
        self.observation_spec = Composite(
            {STATE: Unbounded((prior.state_dim,)), BELIEF: Unbounded((prior.belief_dim,))},
            shape=(),
        )
        self.action_spec = action_spec
        self.reward_spec = Unbounded((1,))

    def _set_seed(self, seed: int) -> None:
        torch.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is None or any(k not in tensordict.keys() for k in (STATE, BELIEF)):
            have = [] if tensordict is None else list(tensordict.keys(True, True))
            raise KeyError(
                "DreamerEnv starts from model states: reset it with a TensorDict holding "
                f"{STATE!r} and {BELIEF!r} (e.g. a replay batch's posterior states). "
                + missing_key_message(STATE if STATE not in have else BELIEF, have)
            )
        return tensordict.select(STATE, BELIEF)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        state, belief = tensordict.get(STATE), tensordict.get(BELIEF)
        _, _, state, belief = self.prior(state, belief, tensordict.get(K.ACTION))
        reward = self.reward_head(torch.cat([state, belief], -1))  # [*B, 1]
        flag = torch.zeros(reward.shape, dtype=torch.bool, device=reward.device)
        return TensorDict(
            {STATE: state, BELIEF: belief, K.REWARD: reward, K.DONE: flag,
             K.TERMINATED: flag, K.TRUNCATED: flag},
            batch_size=tensordict.batch_size,
        )  # fmt: skip
