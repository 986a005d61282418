"""torchrl_lite: a TensorDict-centric, modular reinforcement-learning toolkit for PyTorch.

Subpackages mirror TorchRL's import paths: ``torchrl_lite.data``, ``torchrl_lite.envs``,
``torchrl_lite.modules``, ``torchrl_lite.objectives``, ``torchrl_lite.collectors``,
``torchrl_lite.trainers``, ``torchrl_lite.record``. Heavy optional libraries (gymnasium,
dm_control, ray, loggers, plotting) are imported where they are used.
"""

__version__ = "0.1.0"
