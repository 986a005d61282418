"""TorchRL's collector options ``compile_policy=`` and ``cudagraph_policy=``."""

from __future__ import annotations

from torch import nn


def compile_policy_in_place(policy, compile_policy, cudagraph_policy, owner: str):
    """Apply the collector's compile options to ``policy`` and return it.

    ``compile_policy``: False/None (nothing), True, or a dict of ``torch.compile`` options
    (``"warmup"`` is accepted and ignored: compilation happens on the first call). The
    module is compiled in place (``nn.Module.compile``), so its parameters, its
    ``state_dict`` and weight updates stay those of the policy given.
    ``cudagraph_policy``: only False/None; CUDA graphs are not supported here.
    """
    if cudagraph_policy:
        raise ValueError(
            f"{owner}: cudagraph_policy={cudagraph_policy!r} is not supported by torchrl_lite's "
            "collectors; pass cudagraph_policy=False (compile_policy= is supported)."
        )
    if not compile_policy:
        return policy
    if compile_policy is True:
        options = {}
    elif isinstance(compile_policy, dict):
        options = {k: v for k, v in compile_policy.items() if k != "warmup"}
    else:
        raise TypeError(
            f"{owner}: compile_policy must be False, True or a dict of torch.compile options "
            f"(e.g. {{'mode': 'reduce-overhead'}}), got {compile_policy!r}."
        )
    if not isinstance(policy, nn.Module):
        raise TypeError(
            f"{owner}: compile_policy needs the policy to be an nn.Module, got "
            f"{type(policy).__name__}."
        )
    policy.compile(**options)
    return policy
