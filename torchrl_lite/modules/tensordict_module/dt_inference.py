"""DecisionTransformerInferenceWrapper: act in an env with a decision-transformer actor.

The env keeps a window of the last ``T`` steps (e.g. ``CatFrames`` over observation,
action and return-to-go, as TorchRL's DT scripts do). At each step the wrapper zeroes all
but the last ``inference_context`` steps of the window, moves the action window one step
back (the env's window holds at ``t`` the action taken before ``s_t``; the model reads the
action taken at ``s_t``, unknown for the current step, so zero), runs the actor on the
window and writes the prediction of the window's last step as the action, and the last
return-to-go.
"""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import unravel_key

from torchrl_lite import _keys as K

__all__ = ["DecisionTransformerInferenceWrapper"]


class DecisionTransformerInferenceWrapper(TensorDictModuleBase):
    """Run a DT actor on the env's window and keep the last step's action.

    Args:
        policy: a TensorDict module reading the windows ``[*B, T, ...]`` of observation,
            action and return-to-go and writing per-step actions ``[*B, T, A]``.
        inference_context: steps of the window the actor sees (the rest is zeroed).
        spec: the action spec (optional, kept as ``spec``).
        device: where the wrapper moves the policy (optional).

    Example:
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from torchrl_lite.modules import DTActor
        >>> net = DTActor(4, 2, dict(n_embd=16, n_layer=1, n_head=1, n_inner=32,
        ...     activation="relu", n_positions=60, resid_pdrop=0.0, attn_pdrop=0.0))
        >>> actor = TensorDictModule(net, ["observation", "action", "return_to_go"], ["action"])
        >>> policy = DecisionTransformerInferenceWrapper(actor, inference_context=5)
        >>> td = TensorDict(observation=torch.randn(1, 20, 4), action=torch.randn(1, 20, 2),
        ...     return_to_go=torch.randn(1, 20, 1), batch_size=[1])
        >>> out = policy(td)
        >>> out["action"].shape, out["return_to_go"].shape, out["observation"].shape
        (torch.Size([1, 2]), torch.Size([1, 1]), torch.Size([1, 20, 4]))
    """

    def __init__(self, policy, *, inference_context: int = 5, spec=None, device=None):
        super().__init__()
        if isinstance(inference_context, bool) or not isinstance(inference_context, int):
            raise TypeError(
                f"DecisionTransformerInferenceWrapper: inference_context must be an int, got "
                f"{inference_context!r}."
            )
        if inference_context < 1:
            raise ValueError(
                "DecisionTransformerInferenceWrapper: inference_context must be >= 1, got "
                f"{inference_context}."
            )
        self.td_module = policy if device is None else policy.to(device)
        self.inference_context = inference_context
        self.spec = spec if spec is not None else getattr(policy, "spec", None)
        self.observation_key, self.action_key = K.OBSERVATION, K.ACTION
        self.out_action_key, self.return_to_go_key = K.ACTION, "return_to_go"

    @property
    def in_keys(self) -> list:
        return [self.observation_key, self.action_key, self.return_to_go_key]

    @property
    def out_keys(self) -> list:
        keys = [*self.td_module.out_keys, *self.in_keys]
        return sorted(set(keys), key=str)

    def set_tensor_keys(self, **kwargs) -> None:
        """Rename the entries read and written: ``observation``, ``action``,
        ``return_to_go`` (the windows) and ``out_action`` (the actor's output)."""
        names = {
            "observation": "observation_key",
            "action": "action_key",
            "return_to_go": "return_to_go_key",
            "out_action": "out_action_key",
        }
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise KeyError(
                f"DecisionTransformerInferenceWrapper.set_tensor_keys: unknown {unknown}; "
                f"accepted: {sorted(names)}."
            )
        out_action = unravel_key(kwargs.get("out_action", self.out_action_key))
        if out_action not in [unravel_key(k) for k in self.td_module.out_keys]:
            raise KeyError(
                f"DecisionTransformerInferenceWrapper: the actor writes "
                f"{self.td_module.out_keys}, not {out_action!r}; pass out_action=<one of them>."
            )
        for name, value in kwargs.items():
            setattr(self, names[name], unravel_key(value))

    def step(self, frames: int = 1) -> None:
        """Nothing to anneal (collectors call it on exploration modules)."""

    def mask_context(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Zero all but the last ``inference_context`` steps of the windows and align the
        actions with their states.

        In the env's window the entry at step ``t`` holds the action taken *before* ``s_t``
        (the previous one), while the model reads at ``t`` the action taken *at* ``s_t``:
        the action window moves one step back, and the current step's action, not taken
        yet, is zero. So ``inference_context - 1`` actions remain.
        """
        ctx = self.inference_context
        windows = {}
        for key in (self.observation_key, self.action_key, self.return_to_go_key):
            value = tensordict.get(key, None)
            if value is None or value.dim() < 2:
                got = "nothing" if value is None else f"shape {list(value.shape)}"
                raise ValueError(
                    f"DecisionTransformerInferenceWrapper: {key!r} must be a window "
                    f"[*B, T, F] (e.g. kept by CatFrames(dim=-2)), got {got}."
                )
            windows[key] = value
        steps = {key: value.shape[-2] for key, value in windows.items()}
        if len(set(steps.values())) > 1:
            raise ValueError(
                f"DecisionTransformerInferenceWrapper: the windows differ in length {steps}; "
                "keep the same number of steps of each (one CatFrames N for all three)."
            )
        for key, value in windows.items():
            old = max(value.shape[-2] - ctx, 0)  # steps zeroed: [*B, old, F] of [*B, T, F]
            if key == self.action_key:  # a new tensor: [a_1, ..., a_{T-1}, 0]
                value = torch.cat([value[..., 1:, :], torch.zeros_like(value[..., :1, :])], -2)
            else:
                value = value.clone()
            value[..., :old, :] = 0
            tensordict.set(key, value)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        tensordict = tensordict.clone(False)
        observation = tensordict.get(self.observation_key, None)
        tensordict = self.td_module(self.mask_context(tensordict))
        action = tensordict.get(self.out_action_key)
        if tensordict.ndim == action.ndim - 1:  # the window's time dim is a batch dim
            tensordict.batch_size = tensordict.batch_size[:-1]
        tensordict.set(self.out_action_key, action[..., -1, :])  # [*B, A]
        rtg = tensordict.get(self.return_to_go_key)
        tensordict.set(self.return_to_go_key, rtg[..., -1, :])  # [*B, 1]
        tensordict.set(self.observation_key, observation)
        return tensordict

    def to(self, *args, **kwargs):
        self.td_module.to(*args, **kwargs)
        return super().to(*args, **kwargs)
