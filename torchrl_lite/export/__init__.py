"""A trained policy as one deployable file (ONNX, ``torch.export``'s pt2, TorchScript).

The file takes the env's raw observation and returns the action the env takes: the
observation transforms and the action mapping are inside it (see
:mod:`torchrl_lite.export.pipeline`), and a parity check against the eager policy runs as
part of every export (see :mod:`torchrl_lite.export.formats`). ``torchrl-lite export RUN``
and ``torchrl-lite eval --exported FILE --env ID`` are the command-line faces.
"""

from torchrl_lite.export.formats import FORMATS, load_runtime
from torchrl_lite.export.pipeline import ExportedPolicy, ExportError, exportable_policy
from torchrl_lite.export.policy_file import export_policy, export_trained, play_exported

__all__ = [
    "FORMATS",
    "ExportError",
    "ExportedPolicy",
    "export_policy",
    "export_trained",
    "exportable_policy",
    "load_runtime",
    "play_exported",
]
