"""TorchRL's collector options ``compile_policy=`` and ``cudagraph_policy=``."""

from __future__ import annotations

import warnings

import torch
from torch import nn


def compile_policy_in_place(policy, compile_policy, cudagraph_policy, owner: str):
    """Apply the collector's compile options to ``policy`` and return it.

    ``compile_policy``: False/None (nothing), True, or a dict of ``torch.compile`` options
    (``"warmup"`` is accepted and ignored: compilation happens on the first call). The
    module is compiled in place (``nn.Module.compile``), so its parameters, its
    ``state_dict`` and weight updates stay those of the policy given.
    ``cudagraph_policy``: False/None, or True or a dict of options on a machine without
    CUDA, where TorchRL's CUDA-graph wrapper runs the policy as it is: so does this one,
    with a warning. Where CUDA is available it raises: CUDA graphs are not supported here.
    """
    if cudagraph_policy:
        _check_cudagraph(cudagraph_policy, owner)
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


def _check_cudagraph(cudagraph_policy, owner: str) -> None:
    if cudagraph_policy is not True and not isinstance(cudagraph_policy, dict):
        raise TypeError(
            f"{owner}: cudagraph_policy must be False, True or a dict of options (e.g. "
            f"{{'warmup': 5}}), got {cudagraph_policy!r}."
        )
    if torch.cuda.is_available():
        raise ValueError(
            f"{owner}: cudagraph_policy={cudagraph_policy!r} is not supported by torchrl_lite's "
            "collectors on a CUDA machine; pass cudagraph_policy=False (compile_policy= is "
            "supported)."
        )
    warnings.warn(
        f"{owner}: cudagraph_policy={cudagraph_policy!r} on a machine without CUDA: the "
        "policy runs as it is (as TorchRL's CUDA-graph wrapper does without CUDA).",
        UserWarning,
        stacklevel=4,
    )
