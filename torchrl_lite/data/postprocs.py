"""Batch post-processors for collectors (``collector(..., postproc=...)``): ``MultiStep``.

``MultiStep(gamma, n_steps)`` turns each step of a ``[*B, T]`` batch into an n-step
transition, as TorchRL's post-processor of the same name does. For step ``t`` let
``k = min(n_steps + 1, steps to the end of t's trajectory in this batch)``; then

* ``("next", "reward")`` = ``sum_{i<k} gamma**i * r_{t+i}`` (the one-step reward is kept
  under ``("next", "original_reward")``),
* the other ``"next"`` entries (observation, done flags) are those of step ``t + k - 1``,
* ``"steps_to_next_obs"`` = ``k`` and ``"gamma"`` = ``gamma**k`` (``[*B, T, 1]``): the
  discount of the bootstrap value ``V(("next", "observation"))``.

``n_steps=0`` is the identity (plus those entries). A batch knows nothing of the steps
after it, so by default the last steps of a batch get shorter windows (TorchRL's
post-processor has the same bias). With ``across_batches=True`` the last ``n_steps``
steps of each batch are held back and emitted with the next batch, once their windows
are complete: for one collector's consecutive batches (not ``split_trajs``) every window
then has ``n_steps + 1`` rewards unless an episode ends inside it. The held steps make
the first batch ``n_steps`` steps shorter (``reset()`` drops them, e.g. between runs).

The off-policy losses' one-step estimator (:class:`~torchrl_lite.objectives.value.TD0Estimator`)
reads ``"steps_to_next_obs"`` and discounts the bootstrap by ``gamma ** k``: with the
loss's ``gamma`` equal to this one, the target is the exact n-step target.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_lite import _keys as K

__all__ = ["MultiStep"]


class MultiStep(nn.Module):
    """n-step returns over a collector batch (see the module docstring).

    Args:
        gamma: the discount factor, in ``[0, 1]``.
        n_steps: extra look-ahead steps (``>= 0``; ``n_steps + 1`` rewards are summed).
        across_batches: hold the last ``n_steps`` steps of each batch back for the next
            one, so windows do not stop at batch ends (consecutive batches of one
            collector; see the module docstring).

    Example:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"observation": torch.arange(4.).unsqueeze(-1),
        ...     "next": {"observation": torch.arange(1., 5.).unsqueeze(-1),
        ...              "reward": torch.ones(4, 1),
        ...              "done": torch.tensor([[False], [False], [True], [False]])}}, [4])
        >>> out = MultiStep(gamma=0.5, n_steps=1)(td)
        >>> out["next", "reward"].squeeze(-1).tolist()  # the window stops at the done step
        [1.5, 1.5, 1.0, 1.0]
        >>> out["next", "observation"].squeeze(-1).tolist(), out["steps_to_next_obs"].squeeze(-1).tolist()
        ([2.0, 3.0, 3.0, 4.0], [2, 2, 1, 1])
    """

    def __init__(self, gamma: float, n_steps: int, *, across_batches: bool = False):
        super().__init__()
        if isinstance(n_steps, bool) or not isinstance(n_steps, int) or n_steps < 0:
            raise ValueError(f"MultiStep: n_steps must be an int >= 0, got {n_steps!r}")
        gamma = float(gamma)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"MultiStep: gamma must be in [0, 1], got {gamma}")
        self.gamma, self.n_steps = gamma, n_steps
        self.across_batches = bool(across_batches)
        self._held: TensorDictBase | None = None  # [*B, <= n_steps]: steps not yet emitted

    def reset(self) -> None:
        """Forget the steps held back from the last batch (``across_batches``)."""
        self._held = None

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.across_batches or self.n_steps == 0:
            return self._windows(tensordict)
        if tensordict.batch_dims == 0:
            raise ValueError("MultiStep needs a batch with a time dim ([T] or [*B, T]), got []")
        held = self._held
        if held is not None:
            if held.batch_size[:-1] != tensordict.batch_size[:-1]:
                raise ValueError(
                    f"MultiStep(across_batches=True): this batch is {list(tensordict.batch_size)}"
                    f" but the held steps are {list(held.batch_size)}; the batches must come "
                    "from one collector, with the same envs (call reset() between runs)."
                )
            tensordict = torch.cat([held, tensordict], tensordict.batch_dims - 1)
        steps = tensordict.batch_size[-1]
        ready = max(steps - self.n_steps, 0)  # the steps whose windows are complete
        self._held = tensordict[..., ready:].clone()
        return self._windows(tensordict)[..., :ready]

    def _windows(self, tensordict: TensorDictBase) -> TensorDictBase:
        if tensordict.batch_dims == 0:
            raise ValueError("MultiStep needs a batch with a time dim ([T] or [*B, T]), got []")
        nxt = tensordict.get(K.NEXT, None)
        if nxt is None or nxt.get(K.REWARD, None) is None or nxt.get(K.DONE, None) is None:
            raise KeyError(
                "MultiStep needs ('next', 'reward') and ('next', 'done') in the batch; got "
                f"{sorted(map(str, tensordict.keys(True, True)))}"
            )
        nb = tensordict.batch_dims
        steps = tensordict.batch_size[-1]
        reward, done = nxt.get(K.REWARD), nxt.get(K.DONE)
        done = done.reshape(*tensordict.batch_size)  # [*B, T]
        alive = torch.ones_like(done)  # step t's window still extends
        k = torch.ones(tensordict.batch_size, dtype=torch.long, device=done.device)  # [*B, T]
        ret = reward.clone()  # [*B, T, *r]
        for i in range(1, min(self.n_steps, steps - 1) + 1):
            # step t takes step t + i if no step of t .. t+i-1 is done
            alive = alive.clone()
            alive[..., : steps - i] &= ~done[..., i - 1 : steps - 1]
            alive[..., steps - i :] = False
            ext = alive.reshape(*alive.shape, *[1] * (reward.dim() - nb)).to(reward.dtype)
            window = steps - i
            ret.narrow(nb - 1, 0, window).add_(
                reward.narrow(nb - 1, i, window) * ext.narrow(nb - 1, 0, window),
                alpha=self.gamma**i,
            )
            k += alive.long()
        last = torch.arange(steps, device=k.device) + k - 1  # [*B, T]: step of the window's end
        out = tensordict.copy()
        new_next = nxt.copy()
        for key, value in nxt.items(True, True):
            if key == K.REWARD:
                continue
            index = last.reshape(*last.shape, *[1] * (value.dim() - nb)).expand_as(value)
            new_next.set(key, torch.gather(value, nb - 1, index))
        new_next.set("original_reward", reward)
        new_next.set(K.REWARD, ret)
        out.set(K.NEXT, new_next)
        k = k.unsqueeze(-1)  # [*B, T, 1]
        out.set("steps_to_next_obs", k)
        out.set("gamma", torch.full(k.shape, self.gamma, dtype=reward.dtype).pow(k))
        return out

    def extra_repr(self) -> str:
        extra = ", across_batches=True" if self.across_batches else ""
        return f"gamma={self.gamma}, n_steps={self.n_steps}{extra}"
