"""torchrl_lite: a TensorDict-centric, modular reinforcement-learning toolkit for PyTorch.

Subpackages mirror TorchRL's import paths: ``torchrl_lite.data``, ``torchrl_lite.envs``,
``torchrl_lite.modules``, ``torchrl_lite.objectives``, ``torchrl_lite.collectors``,
``torchrl_lite.trainers``, ``torchrl_lite.record``. Heavy optional libraries (gymnasium,
dm_control, ray, loggers, plotting) are imported where they are used. Seed 000's
``Learner`` (``from torchrl_lite import Learner``) drives a ``torchrl_lite.scheme.Scheme``.
"""

__version__ = "0.1.0"

__all__ = ["Learner", "logger", "timeit"]


def __getattr__(name):  # on first use: `import torchrl_lite` stays light
    if name == "Learner":
        from torchrl_lite.learner import Learner

        return Learner
    if name in ("logger", "torchrl_logger", "timeit", "compile_with_warmup"):
        from torchrl_lite import _utils

        return getattr(_utils, "logger" if name == "torchrl_logger" else name)
    raise AttributeError(f"module 'torchrl_lite' has no attribute {name!r}")
