"""PendulumEnv: gymnasium's Pendulum-v1 in pure torch, batched and stateless.

The whole state lives in the TensorDict, so ``step`` is a pure function of its input:

* ``"th"``, ``"thdot"``: angle and angular velocity, float64, shape ``[*batch]`` (one
  scalar per batch element, as in TorchRL's pendulum tutorial). float64 keeps the
  trajectories equal to gymnasium's, which integrates in float64 numpy.
* ``"params"``: ``max_speed``, ``max_torque``, ``dt``, ``g``, ``m``, ``l``, float64,
  shape ``[*batch]`` each, so every batch element may have its own physics.
* ``"observation"``: ``[cos th, sin th, thdot]``, float32, shape ``[*batch, 3]``.
* ``"action"``: torque, float32, ``[*batch, 1]``; ``"reward"``: float32, ``[*batch, 1]``.

``step`` reads ``th``, ``thdot``, ``params`` and ``action`` and writes the new ``th``,
``thdot`` and ``observation`` (plus reward and done flags) under ``"next"``; the params
stay at the root. The only hidden state is the generator that ``reset`` samples from.
"""

from __future__ import annotations

import math

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite._utils import missing_key_message
from torchrl_lite.data.tensor_specs import Bounded, Composite, Unbounded
from torchrl_lite.envs.common import EnvBase

__all__ = ["PendulumEnv"]

_PARAMS = "params"
_PARAM_NAMES = ("max_speed", "max_torque", "dt", "g", "m", "l")
_STATE_DTYPE = torch.float64
_INIT_TH = math.pi  # reset draws th ~ U(-pi, pi) and thdot ~ U(-1, 1), like gymnasium
_INIT_THDOT = 1.0


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """Wrap angles to ``[-pi, pi)`` (gymnasium's ``angle_normalize``)."""
    return torch.remainder(x + math.pi, 2 * math.pi) - math.pi


class PendulumEnv(EnvBase):
    """Gymnasium's Pendulum-v1 in pure torch: batched, stateless, on any device.

    Same dynamics and rewards as Pendulum-v1; it never terminates and never truncates
    (add a ``StepCounter`` transform for a time limit). Actions are clipped to
    ``[-max_torque, max_torque]`` like gymnasium does, after the spec check of the first
    step. The env accepts any leading batch in ``step``/``reset`` (``batch_locked`` is
    False); ``batch_size`` is the batch of ``reset()`` called without a TensorDict.

    Args:
        td_params: default physical params, a TensorDict holding ``"params"`` as built
            by :meth:`gen_params` (batch ``[]`` or ``batch_size``); ``gen_params()`` if None.
        seed: seed of the reset generator; drawn from torch's global RNG if None.
        device: where the env's tensors live (default CPU).
        batch_size: batch of ``reset()`` without a TensorDict (default: that of ``td_params``).
        spec_check: when ``step`` checks the action against ``action_spec`` (see ``EnvBase``).

    Example:
        >>> env = PendulumEnv(seed=0)
        >>> env.rollout(5)["next", "observation"].shape
        torch.Size([5, 3])
        >>> td = PendulumEnv.gen_params(g=9.81, batch_size=[2])  # no reset: set the state
        >>> td["th"] = torch.zeros(2, dtype=torch.float64)
        >>> td["thdot"] = torch.zeros(2, dtype=torch.float64)
        >>> td["action"] = torch.ones(2, 1)
        >>> env.step(td)["next", "thdot"]
        tensor([0.1500, 0.1500], dtype=torch.float64)
    """

    batch_locked = False
    _requires_reset = False

    def __init__(
        self,
        td_params: TensorDictBase | None = None,
        seed: int | None = None,
        device=None,
        batch_size=None,
        spec_check: str = "first",
    ):
        if td_params is None:
            td_params = self.gen_params()
        if _PARAMS not in td_params.keys():
            raise KeyError(
                f"PendulumEnv td_params must hold {_PARAMS!r} (build it with PendulumEnv.gen_params()). "
                + missing_key_message(_PARAMS, td_params.keys(True, True))
            )
        if batch_size is None:
            batch_size = td_params.batch_size
        super().__init__(device=device, batch_size=batch_size, spec_check=spec_check)
        try:
            td_params = td_params.select(_PARAMS).expand(self.batch_size)
        except RuntimeError as err:
            raise ValueError(
                f"PendulumEnv td_params has batch {list(td_params.batch_size)}, which does not "
                f"expand to batch_size {list(self.batch_size)}"
            ) from err
        self.td_params = td_params.to(self.device).to(_STATE_DTYPE).clone()
        self._make_specs()
        if seed is None:
            seed = int(torch.empty((), dtype=torch.int64).random_().item())
        self.set_seed(seed)

    @staticmethod
    def gen_params(g: float = 10.0, batch_size=None, device=None) -> TensorDict:
        """Pendulum-v1's physical params under ``"params"``, expanded to ``batch_size``.

        Example:
            >>> PendulumEnv.gen_params(g=9.81, batch_size=[4])["params", "g"]
            tensor([9.8100, 9.8100, 9.8100, 9.8100], dtype=torch.float64)
        """
        values = {"max_speed": 8.0, "max_torque": 2.0, "dt": 0.05, "g": g, "m": 1.0, "l": 1.0}
        params = {k: torch.tensor(v, dtype=_STATE_DTYPE, device=device) for k, v in values.items()}
        td = TensorDict({_PARAMS: params}, batch_size=[], device=device)
        if batch_size:
            td = td.expand(batch_size).clone()
        return td

    def _make_specs(self) -> None:
        batch, dev = self.batch_size, self.device
        scalar = Unbounded(batch, device=dev, dtype=_STATE_DTYPE)  # one float64 per element
        self.observation_spec = Composite(
            th=scalar.clone(),
            thdot=scalar.clone(),
            observation=Unbounded((*batch, 3), device=dev, dtype=torch.float32),
            shape=batch,
            device=dev,
        )
        params = Composite({k: scalar.clone() for k in _PARAM_NAMES}, shape=batch, device=dev)
        self.state_spec = Composite(
            th=scalar.clone(), thdot=scalar.clone(), params=params, shape=batch, device=dev
        )
        max_torque = self.td_params.get((_PARAMS, "max_torque")).unsqueeze(-1)  # [*batch, 1]
        self.action_spec = Bounded(
            -max_torque, max_torque, (*batch, 1), device=dev, dtype=torch.float32
        )
        self.reward_spec = Unbounded((*batch, 1), device=dev, dtype=torch.float32)

    # -- the EnvBase contract ----------------------------------------------------------
    def _set_seed(self, seed: int) -> None:
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        batch = self.batch_size if tensordict is None else tensordict.batch_size
        params = tensordict.get(_PARAMS, None) if tensordict is not None else None
        if params is None:
            params = self._default_params(batch)
        th = _uniform(batch, _INIT_TH, self.rng, self.device)
        thdot = _uniform(batch, _INIT_THDOT, self.rng, self.device)
        out = {"th": th, "thdot": thdot, K.OBSERVATION: _observation(th, thdot), _PARAMS: params}
        return _td.new(out, batch, self.device)

    def _default_params(self, batch: torch.Size) -> TensorDictBase:
        try:
            return self.td_params.get(_PARAMS).expand(batch).clone()
        except RuntimeError as err:
            raise ValueError(
                f"PendulumEnv(batch_size={list(self.batch_size)}) cannot reset a TensorDict of batch "
                f"{list(batch)}: its default params do not expand to it. Put 'params' in the "
                f"TensorDict (PendulumEnv.gen_params(batch_size={list(batch)})) or build the env "
                "with batch_size=[]."
            ) from err

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        th, thdot, u, p = (_get(tensordict, key) for key in ("th", "thdot", K.ACTION, _PARAMS))
        batch = tensordict.batch_size
        if th.shape != batch or thdot.shape != batch:
            raise ValueError(
                f"PendulumEnv.step: 'th' and 'thdot' must have the TensorDict's batch shape "
                f"{list(batch)}, got {list(th.shape)} and {list(thdot.shape)}"
            )
        g, m, length, dt = p.get("g"), p.get("m"), p.get("l"), p.get("dt")
        max_torque, max_speed = p.get("max_torque"), p.get("max_speed")
        # gymnasium keeps the torque in float32 (np.float32 action times Python floats)
        # and the state in float64; the casts below repeat that, so the results agree.
        u = u.squeeze(-1)  # [*batch]
        u = torch.minimum(torch.maximum(u, (-max_torque).to(u.dtype)), max_torque.to(u.dtype))
        costs = angle_normalize(th) ** 2 + 0.1 * thdot**2 + 0.001 * (u**2)  # [*batch]
        torque = (3.0 / (m * length**2)).to(u.dtype) * u
        new_thdot = thdot + (3 * g / (2 * length) * torch.sin(th) + torque) * dt
        new_thdot = torch.minimum(torch.maximum(new_thdot, -max_speed), max_speed)
        new_th = th + new_thdot * dt
        reward = (-costs).to(torch.float32).unsqueeze(-1)  # [*batch, 1]
        done = torch.zeros((*batch, 1), dtype=torch.bool, device=reward.device)
        out = {
            "th": new_th,
            "thdot": new_thdot,
            K.OBSERVATION: _observation(new_th, new_thdot),
            K.REWARD: reward,
            K.DONE: done,
            K.TERMINATED: done.clone(),
            K.TRUNCATED: done.clone(),
        }
        return _td.new(out, batch, tensordict.device)


def _get(tensordict: TensorDictBase, key):
    value = tensordict.get(key, None)
    if value is None:
        raise KeyError(
            f"PendulumEnv.step needs {key!r} (with 'th', 'thdot', 'params' and 'action'); "
            "start from env.reset() or set them. "
            + missing_key_message(key, tensordict.keys(True, True))
        )
    return value


def _uniform(batch: torch.Size, high: float, rng: torch.Generator, device) -> torch.Tensor:
    """Samples of ``U(-high, high)``, float64, shape ``batch``."""
    u = torch.rand(batch, generator=rng, dtype=_STATE_DTYPE, device=device)
    return (2 * u - 1) * high


def _observation(th: torch.Tensor, thdot: torch.Tensor) -> torch.Tensor:
    """``[cos th, sin th, thdot]`` cast to float32: ``[*batch]`` -> ``[*batch, 3]``."""
    return torch.stack([torch.cos(th), torch.sin(th), thdot], dim=-1).to(torch.float32)
