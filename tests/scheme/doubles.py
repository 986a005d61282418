"""A minimal stand-in for the ``torchrl_lite.agent`` factories, written to the contract in
``notes/agent_contract.md``: PPO on the pure-torch ``PendulumEnv`` (fast, seedable, no
gymnasium). Used by the Scheme/Learner tests until (and besides) the real ``agent`` code;
it lives in tests/ only. ``hand_loop`` is the plain loop the 1/1 Scheme must equal.
"""

from __future__ import annotations

import torch
from tensordict.nn import TensorDictModule
from tensordict.nn.distributions import NormalParamExtractor
from torch import nn

from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.envs import Compose, PendulumEnv, RewardSum, StepCounter, TransformedEnv
from torchrl_lite.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl_lite.objectives import ClipPPOLoss
from torchrl_lite.objectives.value import GAE

EPISODE_STEPS = 50  # episodes end (truncated) after this many steps


def env_seed(initial_seed, index_grad_worker, index_col_worker):
    return initial_seed + 1000 * index_grad_worker + 100 * index_col_worker


def make_envs_factory(vec_env_size=2, fail_in_worker=None):
    """``train_envs_factory(device, initial_seed, index_col_worker, index_grad_worker)``."""

    def factory(device, initial_seed, index_col_worker=0, index_grad_worker=0):
        if fail_in_worker is not None and index_col_worker == fail_in_worker:
            raise ValueError(f"env factory failed on purpose in col worker {index_col_worker}")
        env = PendulumEnv(
            seed=env_seed(initial_seed, index_grad_worker, index_col_worker),
            batch_size=[vec_env_size],
        )
        return TransformedEnv(env, Compose(StepCounter(EPISODE_STEPS), RewardSum()))

    return factory


class Actor(nn.Module):
    recurrent_hidden_state_size = 1

    def __init__(self, hidden=16):
        super().__init__()
        net = nn.Sequential(
            nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 2), NormalParamExtractor()
        )
        self.policy = ProbabilisticActor(
            TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
            in_keys=["loc", "scale"],
            distribution_class=TanhNormal,
            distribution_kwargs={"low": -2.0, "high": 2.0},
            return_log_prob=True,
        )
        self.critic = ValueOperator(
            nn.Sequential(nn.Linear(3, hidden), nn.Tanh(), nn.Linear(hidden, 1)),
            in_keys=["observation"],
        )


def make_actor_factory(hidden=16, restart_model=None):
    def factory(device):
        actor = Actor(hidden).to(device)
        if restart_model is not None:
            actor.load_state_dict(torch.load(restart_model, weights_only=True))
        return actor

    return factory


class PPOAlgo:
    on_policy = True

    def __init__(self, actor, lr, num_epochs, num_mini_batch):
        self.actor = actor
        self.num_epochs, self.num_mini_batch, self.mini_batch_size = (
            num_epochs,
            num_mini_batch,
            None,
        )
        self.loss = ClipPPOLoss(actor.policy, actor.critic, entropy_coef=0.0)
        self.gae = GAE(value_network=actor.critic, gamma=0.9, lmbda=0.95)
        self.optimizer = torch.optim.Adam(self.loss.parameters(), lr=lr)
        self.acting_policy = actor.policy
        self.num_updates_done = 0

    def parameters_to_train(self):
        return list(self.loss.parameters())

    def compute_gradients(self, batch):
        self.optimizer.zero_grad()
        out = self.loss(batch)
        total = out["loss_objective"] + out["loss_critic"]
        total.backward()
        grads = [None if p.grad is None else p.grad.clone() for p in self.parameters_to_train()]
        return grads, {"loss": float(total.detach())}

    def apply_gradients(self, grads=None):
        if grads is not None:
            for p, g in zip(self.parameters_to_train(), grads):
                p.grad = None if g is None else g.clone()
        nn.utils.clip_grad_norm_(self.parameters_to_train(), 0.5)
        self.optimizer.step()
        self.num_updates_done += 1

    def get_weights(self):
        return {k: v.detach().clone() for k, v in self.actor.state_dict().items()}

    def set_weights(self, weights):
        self.actor.load_state_dict(weights)

    def update_algorithm_parameter(self, name, value):
        if name != "lr":
            raise ValueError(f"unknown algorithm parameter {name!r}; valid: ['lr']")
        for group in self.optimizer.param_groups:
            group["lr"] = value

    def state_dict(self):
        return {
            "actor": self.actor.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "updates": self.num_updates_done,
        }

    def load_state_dict(self, state):
        self.actor.load_state_dict(state["actor"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.num_updates_done = state["updates"]


def make_algo_factory(lr=3e-3, num_epochs=2, num_mini_batch=2):
    def factory(device, actor):
        return PPOAlgo(actor, lr, num_epochs, num_mini_batch)

    return factory


class GAEStorage:
    def __init__(self, size, algo):
        self.steps_per_collection = size
        self.algo = algo
        self.data = []
        self.flat = None

    def insert(self, batch):
        self.data.append(batch)

    def before_gradients(self):
        rows = []
        for batch in self.data:
            with torch.no_grad():
                self.algo.gae(batch)
            rows.append(batch.reshape(-1))
        self.flat = torch.cat(rows)

    def generate_batches(self, num_mini_batch, mini_batch_size, num_epochs):
        n = self.flat.shape[0]
        size = n // num_mini_batch
        for _ in range(num_epochs):
            perm = torch.randperm(n)
            for i in range(num_mini_batch):
                yield self.flat[perm[i * size : (i + 1) * size]]

    def after_gradients(self):
        self.data, self.flat = [], None

    def state_dict(self):
        return {"data": self.data, "flat": self.flat}

    def load_state_dict(self, state):
        self.data, self.flat = list(state["data"]), state["flat"]


def make_storage_factory(size=20):
    def factory(device, actor, algo):
        return GAEStorage(size, algo)

    return factory


def factories(vec_env_size=2, size=20, **env_kwargs):
    return {
        "algo_factory": make_algo_factory(),
        "actor_factory": make_actor_factory(),
        "storage_factory": make_storage_factory(size),
        "train_envs_factory": make_envs_factory(vec_env_size, **env_kwargs),
    }


def hand_loop(seed, rounds, vec_env_size=2, size=20):
    """The plain torchrl_lite loop over the contract's components; returns the weights and
    the per-update losses."""
    torch.manual_seed(seed)
    f = factories(vec_env_size, size)
    envs = f["train_envs_factory"]("cpu", seed, index_col_worker=0, index_grad_worker=0)
    actor = f["actor_factory"]("cpu")
    algo = f["algo_factory"]("cpu", actor)
    storage = f["storage_factory"]("cpu", actor, algo)
    collector = SyncDataCollector(envs, algo.acting_policy, frames_per_batch=size * vec_env_size)
    losses = []
    for _ in range(rounds):
        storage.insert(collector.next())
        storage.before_gradients()
        for mb in storage.generate_batches(
            algo.num_mini_batch, algo.mini_batch_size, algo.num_epochs
        ):
            grads, info = algo.compute_gradients(mb)
            algo.apply_gradients(grads)
            losses.append(info["loss"])
        storage.after_gradients()
    collector.shutdown()
    return algo.get_weights(), losses


class FaultyPendulum(PendulumEnv):
    """A PendulumEnv whose step raises (``mode="raise"``) or hangs (``"hang"``) after
    ``after`` steps: an env bug or a stuck simulator mid-run."""

    def __init__(self, after, mode="raise", **kwargs):
        super().__init__(**kwargs)
        self._after, self._mode, self._count = after, mode, 0

    def _step(self, td):
        self._count += 1
        if self._count > self._after:
            if self._mode == "hang":
                import time

                time.sleep(3600)
            raise RuntimeError("env step failed on purpose")
        return super()._step(td)


def make_faulty_envs_factory(after, mode="raise", vec_env_size=2, only_col_worker=None):
    def factory(device, initial_seed, index_col_worker=0, index_grad_worker=0):
        seed = env_seed(initial_seed, index_grad_worker, index_col_worker)
        if only_col_worker is None or index_col_worker == only_col_worker:
            env = FaultyPendulum(after, mode, seed=seed, batch_size=[vec_env_size])
        else:
            env = PendulumEnv(seed=seed, batch_size=[vec_env_size])
        return TransformedEnv(env, Compose(StepCounter(EPISODE_STEPS), RewardSum()))

    return factory


class SlowPendulum(PendulumEnv):
    """A PendulumEnv whose every step sleeps ``step_s`` seconds (a slow simulator)."""

    def __init__(self, step_s, **kwargs):
        super().__init__(**kwargs)
        self._step_s = step_s

    def _step(self, td):
        import time

        time.sleep(self._step_s)
        return super()._step(td)


def make_slow_envs_factory(slow_col_worker, step_s, vec_env_size=2):
    """Collection worker ``slow_col_worker`` steps a ``SlowPendulum``, the others a
    ``PendulumEnv``."""

    def factory(device, initial_seed, index_col_worker=0, index_grad_worker=0):
        seed = env_seed(initial_seed, index_grad_worker, index_col_worker)
        if index_col_worker == slow_col_worker:
            env = SlowPendulum(step_s, seed=seed, batch_size=[vec_env_size])
        else:
            env = PendulumEnv(seed=seed, batch_size=[vec_env_size])
        return TransformedEnv(env, Compose(StepCounter(EPISODE_STEPS), RewardSum()))

    return factory
