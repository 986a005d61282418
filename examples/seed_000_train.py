"""Seed 000's training script ("Breaking down PyTorchRL"), with ``pytorchrl`` -> ``torchrl_lite``.

The seed's code is kept as written, including its two typos: it imports ``GAEBuffer``
and then uses ``OnPolicyGAEBuffer`` (both names exist: one class), and it gives
``col_communication`` twice (the second ``update`` writes the same key again, so the
gradient workers keep the default ``grad_communication="synchronous"``).

Completions (the seed's page uses three names it never defines; these are the minimal
definitions that make it run, each marked ``# completion``):

1. ``make_pybullet_train_env``: the page's own simplified env factory is called
   ``pybullet_train_env_factory``; the name it passes to ``VecEnv`` is that factory.
2. ``OnPolicyGAEBuffer``: imported next to ``GAEBuffer`` (the same class).
3. ``actor_factory``: the actor of the page's evaluation snippet (an ``OnPolicyActor``
   with ``MLP`` feature extractors), built from the VecEnv's spaces.
4. A last ``learner.save_model()`` after the loop (the seed saves every 100 iterations
   only, so its last 99 would otherwise be lost), a full checkpoint next to each save
   with ``--resume`` to continue a run, and command-line overrides for a short run;
   every default is the seed's value.

Run: ``python examples/seed_000_train.py`` (the seed's 1M steps), or for a smoke run
``python examples/seed_000_train.py --target-steps 4000 --log-dir /tmp/seed000``. Then
``python examples/seed_000_evaluate.py`` plays an episode with the saved model.
"""

import argparse

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--target-steps", type=int, default=1000000)
parser.add_argument("--log-dir", default="/tmp/train_example")
parser.add_argument("--col-remote-workers", type=int, default=1)
parser.add_argument("--col-communication", default="synchronous")
parser.add_argument("--no-ray-init", action="store_true", help="skip ray.init() (1/1 needs no Ray)")
parser.add_argument("--resume", action="store_true", help="continue from log_dir/checkpoint")
parser.add_argument(
    "--worker-timeout", type=float, default=None, help="Scheme's worker_timeout (s)"
)
args = parser.parse_args()  # completion 4

if __name__ == "__main__":
    import ray  # This line is only required when running in a cluster.

    if not args.no_ray_init:
        ray.init()  # This line is only required when running in a cluster.

    # 2. Defining a vectorized environment
    from torchrl_lite.envs import pybullet_train_env_factory

    make_pybullet_train_env = pybullet_train_env_factory  # completion 1

    from torchrl_lite.agent.env import VecEnv

    # Define Environment Vector
    train_envs_factory, action_space, obs_space = VecEnv.create_factory(
        vec_env_size=1,
        log_dir=args.log_dir,
        env_fn=make_pybullet_train_env,
        env_kwargs={"env_id": "HalfCheetahBulletEnv-v0"},
    )

    # 3. Defining a RL agent
    # isort: off
    from torchrl_lite.agent.algos import PPO
    from torchrl_lite.agent.storages import GAEBuffer  # noqa: F401  (the seed's import)
    from torchrl_lite.agent.storages import OnPolicyGAEBuffer  # completion 2
    # isort: on

    # Define RL training algorithm
    algo_factory = PPO.create_factory(
        lr=1e-4, num_epochs=4, clip_param=0.2, entropy_coef=0.01,
        value_loss_coef=.5, max_grad_norm=.5, num_mini_batch=4,
        use_clipped_value_loss=True, gamma=0.99)  # fmt: skip

    # Define rollouts storage
    storage_factory = OnPolicyGAEBuffer.create_factory(size=1000, gae_lambda=0.95)

    # Define the actor (completion 3: the evaluation snippet's actor)
    from torchrl_lite.agent.actors import OnPolicyActor, get_feature_extractor

    actor_factory = OnPolicyActor.create_factory(
        obs_space, action_space, feature_extractor_network=get_feature_extractor("MLP")
    )

    # 4. Customizing training scheme
    from torchrl_lite.scheme import Scheme

    # Core components params
    scheme_parameters = {
        "algo_factory": algo_factory,
        "actor_factory": actor_factory,
        "storage_factory": storage_factory,
        "train_envs_factory": train_envs_factory}  # fmt: skip

    # Collection operation params
    scheme_parameters.update({
        "col_remote_workers": args.col_remote_workers,
        "col_communication": args.col_communication})  # fmt: skip

    # Gradient computation operation params
    scheme_parameters.update({
        "grad_remote_workers": 1,
        "col_communication": args.col_communication})  # fmt: skip

    if args.worker_timeout is not None:  # completion 4: loaded machines start workers slowly
        scheme_parameters["worker_timeout"] = args.worker_timeout

    scheme = Scheme(**scheme_parameters)

    # 5. Executing training loop
    from torchrl_lite import Learner

    # 6. Define learner
    learner = Learner(scheme, target_steps=args.target_steps, log_dir=args.log_dir)

    if args.resume:  # completion 4
        import os

        if os.path.isdir(os.path.join(args.log_dir, "checkpoint")):
            learner.load_checkpoint()

    # 7. Define train loop
    iterations = 0
    while not learner.done():
        learner.step()
        if iterations % 1 == 0:
            learner.print_info()
        if iterations % 100 == 0:
            save_name = learner.save_model()
            learner.save_checkpoint()  # completion 4
        iterations += 1
    save_name = learner.save_model()  # completion 4
    learner.save_checkpoint()
    print(f"model saved to {save_name}", flush=True)
