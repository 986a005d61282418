"""Seed 000's evaluation snippet ("6. Checking results"), ``pytorchrl`` -> ``torchrl_lite``.

The one change is gymnasium's API: ``obs, info = env.reset()`` and the five-value
``step`` (``done = terminated or truncated``); gymnasium also refuses ``render()`` before
the first ``reset()``, so the first render comes after it. The seed's loop plays episodes
forever (it resets ``done`` after each); ``--episodes`` stops it (default 1). ``--render``
opens PyBullet's window (``render_mode="human"``; headless machines have none).
The snippet's missing ``import torch`` is added.
"""

import argparse

import torch

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--restart-model", default="/tmp/train_example/actor_critic.state_dict")
parser.add_argument("--episodes", type=int, default=1)
parser.add_argument("--render", action="store_true")
args = parser.parse_args()

from torchrl_lite.agent.actors import OnPolicyActor, get_feature_extractor  # noqa: E402
from torchrl_lite.envs import pybullet_test_env_factory  # noqa: E402

# Define single copy of the environment
env = pybullet_test_env_factory(
    env_id="HalfCheetahBulletEnv-v0", render_mode="human" if args.render else None
)

# Define agent device and agent
device = torch.device("cpu")
policy = OnPolicyActor.create_factory(
    env.observation_space, env.action_space,
    feature_extractor_network=get_feature_extractor("MLP"),
    restart_model=args.restart_model)(device)  # fmt: skip

# Define initial Tensors
obs, info = env.reset()
env.render()
done, episode_reward = 0, False
rhs = torch.zeros(1, policy.recurrent_hidden_state_size).to(device)
episodes = 0

# Execute episodes
while not done:
    obs = torch.Tensor(obs).view(1, -1).to(device)
    done = torch.Tensor([done]).view(1, -1).to(device)
    with torch.no_grad():
        _, clipped_action, _, rhs, _ = policy.get_action(obs, rhs, done, deterministic=True)
    obs, reward, terminated, truncated, info = env.step(clipped_action.squeeze().cpu().numpy())
    done = terminated or truncated
    episode_reward += reward
    if done:
        print("EPISODE: reward: {}".format(episode_reward), flush=True)  # noqa: UP032
        episodes += 1
        if episodes == args.episodes:
            break
        done, episode_reward = 0, False
        env.render()
        obs, info = env.reset()
env.close()
