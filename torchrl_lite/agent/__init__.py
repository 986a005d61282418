"""Seed 000's components (PyTorchRL's API) as thin adapters over torchrl_lite's own.

``env.VecEnv``, ``actors`` (``OnPolicyActor``, ``OffPolicyActor``), ``algos`` (``PPO``,
``A2C``, ``SAC``, ``TD3``, ``DDPG``, ``DQN``, ``DDQN``) and ``storages`` (``GAEBuffer``,
replay buffers) each have a ``create_factory(...)`` whose factory builds the component
in a worker: ``envs = train_envs_factory(device, seed, index_col_worker,
index_grad_worker)``, ``actor = actor_factory(device)``, ``algo = algo_factory(device,
actor)``, ``storage = storage_factory(device, actor, algo)``; ``torchrl_lite.scheme``
runs them.
"""

from torchrl_lite.agent.recipes import factories_from_recipe

__all__ = ["factories_from_recipe"]
