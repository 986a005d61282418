"""EndOfLifeTransform: Atari's loss-of-a-life signal, for losses to treat as an episode end."""

from __future__ import annotations

import torch

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Unbounded
from torchrl_lite.envs.transforms.episode import _env_only
from torchrl_lite.envs.transforms.transforms import Transform, _norm_key, td_get, td_set

__all__ = ["EndOfLifeTransform"]


class EndOfLifeTransform(Transform):
    """Write ``"end-of-life"``: True when the game lost a life this step, or the episode ended.

    DQN-style agents treat a lost life as a terminal state for bootstrapping while the
    env plays on; the signal is not part of the done spec, so it never resets the env.
    Point a loss or value estimator at it with ``register_keys(loss)`` (or
    ``loss.set_keys(done="end-of-life", terminated="end-of-life")``). The life count is
    read from the wrapped gymnasium env (``eol_attribute``, a dotted path to an int or a
    method returning one) and kept in ``"lives"``.

    Args:
        eol_key: the entry written (bool, the shape of ``done_key``).
        lives_key: the entry holding the remaining lives (int64).
        done_key: the env's done entry, or-ed into the signal.
        eol_attribute: where the base env exposes the lives.

    Example:
        >>> env = TransformedEnv(GymEnv("ALE/Breakout-v5"), EndOfLifeTransform())  # doctest: +SKIP
        >>> env.rollout(100)["next", "end-of-life"].any()  # doctest: +SKIP
        tensor(True)
    """

    def __init__(
        self,
        eol_key="end-of-life",
        lives_key="lives",
        done_key=K.DONE,
        eol_attribute: str = "unwrapped.ale.lives",
    ):
        super().__init__(in_keys=[done_key], out_keys=[done_key])
        self.eol_key, self.lives_key = _norm_key(eol_key), _norm_key(lives_key)
        self.done_key = _norm_key(done_key)
        if not isinstance(eol_attribute, str) or not eol_attribute:
            raise TypeError(
                f"EndOfLifeTransform: eol_attribute must be a dotted attribute path such as "
                f"'unwrapped.ale.lives', got {eol_attribute!r}."
            )
        self.eol_attribute = eol_attribute.split(".")
        self._done_spec = None

    def _attach(self, specs):
        super()._attach(specs)
        self._done_spec = specs.done[self.done_key]
        self._device = specs.device

    def _lives(self) -> torch.Tensor:
        parent = self.parent
        if parent is None:
            raise RuntimeError("EndOfLifeTransform only runs inside a TransformedEnv.")
        value = parent.base_env
        for name in self.eol_attribute:
            try:
                value = getattr(value, name)
            except AttributeError:
                raise AttributeError(
                    f"EndOfLifeTransform: the base env has no {'.'.join(self.eol_attribute)!r} "
                    f"(stopped at {name!r}); it needs a gymnasium Atari env, or pass "
                    "eol_attribute= the path to the env's life count."
                ) from None
        if callable(value):
            value = value()
        return torch.as_tensor(value, dtype=torch.int64, device=self._device)

    def _root_keys_read(self):
        return [self.lives_key]

    def _reset(self, tensordict, tensordict_reset):
        shape = self._done_spec.shape
        tensordict_reset.set(
            self.eol_key, torch.zeros(shape, dtype=torch.bool, device=self._device)
        )
        tensordict_reset.set(self.lives_key, self._lives())
        return tensordict_reset

    def _step(self, tensordict, next_tensordict):
        before = td_get(tensordict, self.lives_key)
        if before is None:
            raise KeyError(
                "EndOfLifeTransform: the step input has no lives count; pass the TensorDict "
                "returned by reset() (or step_mdp of the last step). "
                + missing_key_message(self.lives_key, tensordict.keys(True, True))
            )
        done = td_get(next_tensordict, self.done_key)
        lives = self._lives()
        lost = (lives < before).reshape(
            done.shape[: lives.dim()] + (1,) * (done.dim() - lives.dim())
        )
        td_set(next_tensordict, self.eol_key, lost.expand_as(done) | done)
        td_set(next_tensordict, self.lives_key, lives)
        return next_tensordict

    def _call(self, next_tensordict):
        return next_tensordict  # the work needs the step's input: see _step

    forward = _env_only("EndOfLifeTransform")

    def transform_observation_spec(self, observation_spec):
        observation_spec[self.eol_key] = self._done_spec.clone()
        observation_spec[self.lives_key] = Unbounded(
            observation_spec.shape, device=observation_spec.device, dtype=torch.int64
        )
        return observation_spec

    def transform_state_spec(self, state_spec):
        # step() reads the count: as state, batched envs pass it to their sub-envs
        state_spec[self.lives_key] = Unbounded(
            state_spec.shape, device=state_spec.device, dtype=torch.int64
        )
        return state_spec

    def transform_done_spec(self, done_spec):
        return done_spec

    def register_keys(self, loss_or_advantage) -> None:
        """Make a loss or value estimator read the end-of-life entry as its done/terminated."""
        loss_or_advantage.set_keys(done=self.eol_key, terminated=self.eol_key)

    def extra_repr(self):
        return f"eol_key={self.eol_key!r}, lives_key={self.lives_key!r}, done_key={self.done_key!r}"
