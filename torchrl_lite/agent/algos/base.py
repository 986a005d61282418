"""What every seed-000 algorithm is: a loss module, its optimizer(s), a target updater.

The Scheme's workers use this interface:
``compute_gradients(batch) -> (grads, info)`` runs the loss forward and backward on one
minibatch; ``apply_gradients(grads=None)`` writes ``grads`` into ``.grad`` (a gradient
worker's, or an average of several), clips, steps the optimizer(s) and the targets;
``get_weights``/``set_weights`` move everything a worker needs between processes.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from torchrl_lite._utils import did_you_mean

__all__ = ["Algorithm"]


class Algorithm:
    """Base of the adapters: subclasses set ``loss_module``, ``optimizers`` (name ->
    optimizer, stepped in order), ``acting_policy`` and the hyperparameter attributes, and
    may override :meth:`_step_optimizers` / :meth:`_update_targets`.

    Attributes read by the Scheme: ``on_policy``, ``num_epochs``, ``num_mini_batch``,
    ``mini_batch_size`` (on-policy: one of the last two is None; off-policy:
    ``num_mini_batch = num_updates`` samples per round, ``num_epochs = 1``),
    ``start_steps``, ``update_every``, ``num_updates``.
    """

    on_policy: bool = True
    start_steps: int = 0
    update_every: int | None = None
    num_updates: int = 1

    def __init__(self, device, actor, max_grad_norm: float | None = None):
        self.device = torch.device(device)
        self.actor = actor
        self.max_grad_norm = max_grad_norm
        self.num_gradient_updates = 0
        self.optimizers: dict[str, torch.optim.Optimizer] = {}

    # -- what subclasses provide ------------------------------------------------------
    def _parameter_setters(self) -> dict:
        """``{name: setter(value)}`` for :meth:`update_algorithm_parameter`."""
        return {"lr": self._set_lr, "max_grad_norm": self._set_attr("max_grad_norm")}

    def _step_optimizers(self) -> None:
        for optimizer in self.optimizers.values():
            optimizer.step()

    def _update_targets(self) -> None:
        """Move the target networks after an update (none by default)."""

    # -- the contract -------------------------------------------------------------------
    def parameters_to_train(self) -> list[torch.nn.Parameter]:
        """The trained parameters, in a fixed order (``compute_gradients``' order)."""
        return [p for p in self.loss_module.parameters() if p.requires_grad]

    def compute_gradients(self, batch: TensorDictBase):
        """``(grads, info)``: the loss on ``batch`` (a minibatch), backward; ``grads`` are
        the parameters' gradients (None where a parameter got none), ``info`` the losses
        and diagnostics as floats."""
        params = self.parameters_to_train()
        for p in params:
            p.grad = None
        losses = self.loss_module(batch)
        total = sum(v for k, v in losses.items() if k == "loss" or k.startswith("loss_"))
        total.backward()
        grads = [None if p.grad is None else p.grad.detach().clone() for p in params]
        info = {k: float(v.detach()) for k, v in losses.items() if v.numel() == 1}
        info["loss"] = float(total.detach())
        return grads, info

    def apply_gradients(self, grads=None) -> None:
        """One update: ``grads`` (if given) into ``.grad``, norm clip, optimizer step(s),
        target update; the update counter goes up by one."""
        params = self.parameters_to_train()
        if grads is not None:
            if len(grads) != len(params):
                raise ValueError(
                    f"{type(self).__name__}.apply_gradients: got {len(grads)} gradients for "
                    f"{len(params)} parameters (use compute_gradients' list as it is)."
                )
            for p, g in zip(params, grads):
                p.grad = None if g is None else g.to(p.device)
        if self.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(
                [p for p in params if p.grad is not None], self.max_grad_norm
            )
        self._step_optimizers()
        self._update_targets()
        self.num_gradient_updates += 1

    def get_weights(self) -> dict[str, torch.Tensor]:
        """The loss module's state (actor, critics, targets, coefficients), detached."""
        return {k: v.detach().clone() for k, v in self.loss_module.state_dict().items()}

    def set_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.loss_module.load_state_dict(weights)

    def update_algorithm_parameter(self, name: str, value) -> None:
        """Change a hyperparameter now (e.g. ``"lr"``); ValueError naming the valid ones."""
        setters = self._parameter_setters()
        if name not in setters:
            hint = did_you_mean(name, list(setters))
            raise ValueError(
                f"{type(self).__name__}: unknown algorithm parameter {name!r}.{hint} "
                f"Valid: {', '.join(sorted(setters))}."
            )
        setters[name](value)

    def state_dict(self) -> dict:
        return {
            "loss_module": self.loss_module.state_dict(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "num_gradient_updates": self.num_gradient_updates,
            "extra": self._extra_state(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.loss_module.load_state_dict(state["loss_module"])
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        self.num_gradient_updates = state["num_gradient_updates"]
        self._load_extra_state(state.get("extra", {}))

    def _extra_state(self) -> dict:
        return {}

    def _load_extra_state(self, state: dict) -> None:
        pass

    # -- helpers ------------------------------------------------------------------------
    def _set_lr(self, value, names=None) -> None:
        for name, optimizer in self.optimizers.items():
            if names is None or name in names:
                for group in optimizer.param_groups:
                    group["lr"] = float(value)

    def _set_attr(self, attr: str):
        def setter(value):
            setattr(self, attr, value)

        return setter

    @staticmethod
    def _set_buffer(buffer: torch.Tensor):
        def setter(value):
            buffer.fill_(float(value))

        return setter
