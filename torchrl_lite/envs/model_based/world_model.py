"""Envs stepped by a TensorDict world model, in TorchRL's form.

TorchRL's model-based envs take a world model (a TensorDict module reading the state and
the action, writing the next state and ``"reward"``) and copy their specs from the real
env (``set_specs_from_env``). ``DreamerEnv(world_model=..., prior_shape=...,
belief_shape=...)`` builds :class:`WorldModelDreamerEnv` here (ours, built from an RSSM
prior and a reward head, is :class:`~torchrl_lite.envs.model_based.dreamer.DreamerEnv`).

A step returns what the world model writes among the observation, reward and done keys;
observation entries it does not predict (e.g. the real env's pixels) are carried from the
step's input, and imagined episodes never end (done flags False).
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Composite
from torchrl_lite.envs.common import EnvBase
from torchrl_lite.envs.model_based.dreamer import BELIEF, STATE, DreamerEnv
from torchrl_lite.envs.transforms.transforms import Transform

__all__ = ["DreamerDecoder", "ModelBasedEnvBase", "WorldModelDreamerEnv"]


class ModelBasedEnvBase(EnvBase):
    """An env whose step is a world model's forward pass (any leading batch).

    Args:
        world_model: a TensorDict module: state entries and ``"action"`` in, the next
            state entries and ``"reward"`` out.
        params, buffers: accepted for TorchRL's signature; must be None (the module's
            own parameters are used).
        device, batch_size: as for any env.
        run_type_checks: accepted for TorchRL's signature.

    Subclasses implement ``_reset``; call :meth:`set_specs_from_env` before stepping.
    """

    batch_locked = False
    _requires_reset = False

    def __init__(self, world_model, params=None, buffers=None, device="cpu", batch_size=None,
                 run_type_checks: bool = False):  # fmt: skip
        if params is not None or buffers is not None:
            raise ValueError(
                f"{type(self).__name__}(params=..., buffers=...): functional parameters are "
                "not supported; load them into the world model (load_state_dict) instead."
            )
        # EnvBase's, also in WorldModelDreamerEnv (whose next class is our DreamerEnv)
        EnvBase.__init__(self, device=device, batch_size=batch_size, spec_check="never")
        self.world_model = world_model.to(self.device)

    def set_specs_from_env(self, env: EnvBase) -> None:
        """Copy the real env's specs (observations, actions, states, rewards, done flags)."""
        self.batch_size = env.batch_size
        for name in ("full_observation_spec", "full_state_spec", "full_action_spec",
                     "full_reward_spec", "full_done_spec"):  # fmt: skip
            setattr(self, name, getattr(env, name).clone().to(self.device))

    def to(self, device) -> ModelBasedEnvBase:
        """Move the world model (and the specs) to ``device``; returns the env."""
        self.device = torch.device(device)
        self.world_model.to(self.device)
        for name in ("full_observation_spec", "full_state_spec", "full_action_spec",
                     "full_reward_spec", "full_done_spec"):  # fmt: skip
            setattr(self, name, getattr(self, name).to(self.device))
        return self

    def parameters(self, recurse: bool = True):
        """The world model's parameters (frozen by the actor loss while it imagines)."""
        return self.world_model.parameters(recurse)

    def _set_seed(self, seed: int) -> None:
        torch.manual_seed(seed)  # the model samples from torch's global RNG

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.world_model(tensordict.clone(False))
        keys = [
            *self.full_observation_spec.keys(True, True),
            *self.full_reward_spec.keys(True, True),
            *self.full_done_spec.keys(True, True),
        ]
        result = out.select(*keys, strict=False)
        for key in self.full_observation_spec.keys(True, True):
            if key not in result.keys(True, True):
                value = tensordict.get(key, None)
                if value is not None:
                    result.set(key, value)  # not predicted by the model: carried over
        for key in self.full_done_spec.keys(True, True):
            if key not in result.keys(True, True):
                result.set(key, torch.zeros((*tensordict.batch_size, 1), dtype=torch.bool,
                                            device=tensordict.device))  # fmt: skip
        return result


class WorldModelDreamerEnv(ModelBasedEnvBase, DreamerEnv):
    """Dreamer's imagination env in TorchRL's form (``DreamerEnv(world_model, ...)``).

    Args:
        world_model: reads ``"state"``, ``"belief"``, ``"action"``; writes the next
            ``"state"``, ``"belief"`` and ``"reward"`` (TorchRL's ``WorldModelWrapper`` of
            the RSSM prior and the reward model).
        prior_shape, belief_shape: the shapes of ``"state"`` and ``"belief"``.
        obs_decoder: optional TensorDict module from ``(state, belief)`` to a decoded
            observation (``decode_obs``, the ``DreamerDecoder`` transform).
        device, batch_size: as for any env.

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule as Mod
        >>> from torchrl_lite.data import Unbounded
        >>> from torchrl_lite.envs import GymEnv, TensorDictPrimer
        >>> from torchrl_lite.modules import WorldModelWrapper
        >>> class Step(torch.nn.Module):
        ...     def forward(self, state, belief, action):
        ...         return state + action.sum(-1, keepdim=True), belief
        >>> model = WorldModelWrapper(Mod(Step(), ["state", "belief", "action"], ["state", "belief"]),
        ...     Mod(torch.nn.Linear(3, 1), ["state"], ["reward"]))
        >>> env = DreamerEnv(world_model=model, prior_shape=(3,), belief_shape=(2,))
        >>> type(env).__name__
        'WorldModelDreamerEnv'
        >>> real = GymEnv("Pendulum-v1").append_transform(
        ...     TensorDictPrimer(state=Unbounded((3,)), belief=Unbounded((2,))))
        >>> env.set_specs_from_env(real)
        >>> start = TensorDict(state=torch.zeros(4, 3), belief=torch.zeros(4, 2), batch_size=[4])
        >>> env.rollout(3, auto_reset=False, tensordict=start)["next", "reward"].shape
        torch.Size([4, 3, 1])
    """

    def __init__(self, world_model, prior_shape, belief_shape, obs_decoder=None, device="cpu",
                 batch_size=None):  # fmt: skip
        ModelBasedEnvBase.__init__(self, world_model, device=device, batch_size=batch_size)
        self.obs_decoder = obs_decoder
        self.prior_shape, self.belief_shape = torch.Size(prior_shape), torch.Size(belief_shape)

    def set_specs_from_env(self, env: EnvBase) -> None:
        """The real env's specs, with ``"state"`` and ``"belief"`` as the state entries."""
        super().set_specs_from_env(env)
        obs = self.full_observation_spec
        missing = [k for k in (STATE, BELIEF) if k not in obs.keys()]
        if missing:
            raise KeyError(
                f"DreamerEnv.set_specs_from_env: the env has no {missing} observation; prime "
                "them (TensorDictPrimer(state=Unbounded(...), belief=Unbounded(...))). "
                + missing_key_message(missing[0], obs.keys(True, True))
            )
        self.full_state_spec = Composite(
            {STATE: obs[STATE].clone(), BELIEF: obs[BELIEF].clone()},
            shape=self.batch_size, device=self.device,
        )  # fmt: skip

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None:
            return tensordict.clone()
        # no start states given: random ones, as TorchRL does
        td = self.full_state_spec.rand()
        td.update(self.full_observation_spec.rand())
        td.set(K.ACTION, self.action_spec.rand())
        return td.to(self.device)

    def decode_obs(self, tensordict: TensorDictBase, compute_latents: bool = False):
        """Decode ``(state, belief)`` into an observation with ``obs_decoder``."""
        if self.obs_decoder is None:
            raise ValueError(
                "DreamerEnv.decode_obs needs an obs_decoder: build the env with "
                "DreamerEnv(..., obs_decoder=TensorDictModule(decoder, ['state', 'belief'], [...]))."
            )
        if compute_latents:
            tensordict = self.world_model(tensordict)
        return self.obs_decoder(tensordict)


class DreamerDecoder(Transform):
    """Decode each imagined step's latent state into an observation (for videos).

    Appended to a :class:`WorldModelDreamerEnv`, it runs the env's ``obs_decoder`` on every
    reset and step output (e.g. writing ``"reco_pixels"``).
    """

    def _decoder(self):
        env = self.container
        base = getattr(env, "base_env", None)
        decoder = getattr(base, "obs_decoder", None)
        if decoder is None:
            raise ValueError(
                "DreamerDecoder decodes with the obs_decoder of the DreamerEnv it is appended "
                "to: build that env with DreamerEnv(..., obs_decoder=...)."
            )
        return decoder

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._decoder()(next_tensordict)
