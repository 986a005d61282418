"""``Evaluator``: play evaluation episodes with given policy weights, now or in the background.

An evaluation collects ``num_trajectories`` whole episodes with a collector built on
``trajs_per_batch`` (``_trajs.py``), with the exploration type set for evaluation
(deterministic by default), and returns flat metrics named ``"<prefix>/<metric>"``:
``reward`` (mean return: the last ``("next", "episode_reward")`` of an episode when a
``RewardSum`` writes it, else the sum of its rewards), ``reward_std``, ``num_episodes``,
``episode_length``, ``fps`` and ``step``. Every evaluation starts from fresh episodes.

``evaluate()`` blocks. ``trigger_eval()`` runs one in a background thread;
``poll()`` / ``wait()`` return its result and ``pending`` says whether one is running.
``backend="process"`` runs the env and the policy in a worker process
(``MultiSyncDataCollector`` with one worker), from an env constructor and a
``policy_factory``.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor

import torch
from tensordict import TensorDict, TensorDictBase

from torchrl_lite import _keys as K
from torchrl_lite._utils import logger
from torchrl_lite.envs.utils import ExplorationType

__all__ = ["Evaluator"]

_BUSY = ("skip", "error", "queue")
_EPISODE_RETURN = (K.NEXT, "episode_reward")
_STEP_COUNT = (K.NEXT, "step_count")


class Evaluator:
    """Evaluation episodes with the current (or given) policy weights; see the module doc.

    Args:
        env: an env, or a zero-argument constructor (required for ``backend="process"``).
        policy: the policy to evaluate (or give ``policy_factory``).
        policy_factory: builds the policy: called with the env for ``backend="thread"``,
            with no argument for ``backend="process"``.
        num_trajectories: whole episodes per evaluation.
        max_steps: cut episodes after this many steps (``None``: play them to the end).
        frames_per_batch: env steps per internal collector batch (default ``max_steps``,
            else 1000).
        collector_cls: the collector class for ``backend="thread"`` (default
            ``SyncDataCollector``).
        collector_kwargs: more keyword arguments for the collector.
        log_prefix: the metric names' prefix.
        reward_keys: where the reward is read.
        done_keys: kept for TorchRL's signature: episodes end at ``("next", "done")``.
        device: the policy's device (default: where its parameters are).
        exploration_type: the exploration type while evaluating.
        metrics_fn: ``fn(episodes) -> dict`` of extra metrics, from the ``[sum T_i]``
            TensorDict of the episodes (named ``"<prefix>/<name>"``).
        dump_video: after each evaluation, ``dump()`` the ``VideoRecorder`` transforms of
            the evaluation env (``backend="thread"``).
        on_result: ``fn(result_td)`` called after each evaluation with the metrics as a
            TensorDict of scalars; an exception in it is logged, not raised.
        busy_policy: what ``trigger_eval`` does while one runs: ``"skip"`` (returns
            False), ``"error"`` (RuntimeError) or ``"queue"`` (runs it afterwards).
        backend: ``"thread"`` or ``"process"``.

    Example:
        >>> from torchrl_lite.envs import PendulumEnv
        >>> from torchrl_lite.collectors import RandomPolicy
        >>> env = PendulumEnv()
        >>> evaluator = Evaluator(env, RandomPolicy(env.action_spec), num_trajectories=1,
        ...     max_steps=20)
        >>> result = evaluator.evaluate()
        >>> result["eval/num_episodes"], result["eval/episode_length"]
        (1, 20.0)
        >>> evaluator.shutdown()
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        env,
        policy=None,
        *,
        policy_factory=None,
        num_trajectories: int = 10,
        max_steps: int | None = None,
        frames_per_batch: int | None = None,
        collector_cls=None,
        collector_kwargs: dict | None = None,
        log_prefix: str = "eval",
        reward_keys=(K.NEXT, K.REWARD),
        done_keys=(K.NEXT, K.DONE),
        device=None,
        exploration_type: ExplorationType = ExplorationType.DETERMINISTIC,
        metrics_fn=None,
        dump_video: bool = True,
        on_result=None,
        busy_policy: str = "skip",
        backend: str = "thread",
    ):
        if busy_policy not in _BUSY:
            raise ValueError(f"Evaluator: busy_policy must be one of {_BUSY}, got {busy_policy!r}")
        if backend not in ("thread", "process"):
            raise ValueError(
                f"Evaluator: backend must be 'thread' or 'process', got {backend!r} "
                "(Ray evaluation is not available in torchrl_lite)."
            )
        if (policy is None) == (policy_factory is None):
            raise ValueError("Evaluator: pass exactly one of policy and policy_factory.")
        if backend == "process" and (policy_factory is None or not callable(env)):
            raise ValueError(
                "Evaluator(backend='process') builds the env and the policy for the worker: "
                "pass an env constructor (e.g. functools.partial(GymEnv, 'Pendulum-v1')) and "
                "policy_factory= instead of live objects."
            )
        if (
            isinstance(num_trajectories, bool)
            or not isinstance(num_trajectories, int)
            or num_trajectories < 1
        ):
            raise ValueError(
                f"Evaluator: num_trajectories must be an int >= 1, got {num_trajectories!r}"
            )
        self.num_trajectories = num_trajectories
        self.max_steps = max_steps
        self.log_prefix = log_prefix
        self.reward_keys = reward_keys
        self.done_keys = done_keys
        self.metrics_fn = metrics_fn
        self.dump_video = dump_video
        self.on_result = on_result
        self.busy_policy = busy_policy
        self.backend = backend
        self._build = {
            "env": env,
            "policy": policy,
            "policy_factory": policy_factory,
            "frames_per_batch": frames_per_batch or max_steps or 1000,
            "collector_cls": collector_cls,
            "collector_kwargs": dict(collector_kwargs or {}),
            "device": device,
            "exploration_type": exploration_type,
        }
        self._collector = None
        self._lock = threading.Lock()  # one evaluation at a time on the collector
        self._executor: ThreadPoolExecutor | None = None
        self._futures: deque[Future] = deque()
        self._step = 0
        self._closed = False

    # -- synchronous -------------------------------------------------------------------
    def evaluate(self, weights=None, step: int | None = None) -> dict:
        """Play ``num_trajectories`` episodes now and return the metrics.

        Args:
            weights: the policy weights to load first (a module, ``TensorDict`` or
                ``state_dict``); None keeps the current ones.
            step: the step recorded as ``"<prefix>/step"`` (default: a counter).
        """
        result = self._run(weights, self._next_step(step))
        self._notify(result)
        return result

    # -- asynchronous ------------------------------------------------------------------
    def trigger_eval(self, weights=None, step: int | None = None) -> bool:
        """Start an evaluation in the background; False if skipped (``busy_policy``)."""
        self._check_open()
        if self.pending:
            if self.busy_policy == "error":
                raise RuntimeError(
                    "Evaluator: an evaluation is already running; wait() for it, check "
                    "`pending` first, or use busy_policy='skip' or 'queue'."
                )
            if self.busy_policy == "skip":
                return False
        if weights is not None:  # a snapshot: training may change them meanwhile
            weights = _snapshot(weights)
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evaluator")
        step = self._next_step(step)
        self._futures.append(self._executor.submit(self._run_and_notify, weights, step))
        return True

    def poll(self, timeout: float = 0) -> dict | None:
        """The oldest finished background result, waiting up to ``timeout`` s; else None."""
        if not self._futures:
            return None
        future = self._futures[0]
        try:
            future.result(timeout=timeout if timeout > 0 else 0)
        except TimeoutError:
            return None
        self._futures.popleft()
        return future.result()

    def wait(self, timeout: float | None = None) -> dict | None:
        """Block until the oldest background evaluation ends (or ``timeout`` s); its result."""
        if not self._futures:
            return None
        try:
            result = self._futures[0].result(timeout=timeout)
        except TimeoutError:
            return None
        self._futures.popleft()
        return result

    @property
    def pending(self) -> bool:
        """Whether a background evaluation is running or queued."""
        return any(not f.done() for f in self._futures)

    def shutdown(self, timeout: float | None = 5.0) -> None:
        """Finish the running evaluation (queued ones are cancelled), close the collector."""
        self._closed = True
        for future in self._futures:
            future.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
            self._executor = None
        if self._collector is not None:
            self._collector.shutdown()
            self._collector = None

    def state_dict(self) -> dict:
        return {"step": self._step}

    def load_state_dict(self, state_dict: dict) -> None:
        self._step = int(state_dict["step"])

    # -- internals -----------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Evaluator was shut down; create a new one.")

    def _next_step(self, step):
        if step is None:
            step, self._step = self._step, self._step + 1
        return int(step)

    def _make_collector(self):
        b = self._build
        common = {
            "frames_per_batch": b["frames_per_batch"],
            "total_frames": -1,
            "max_frames_per_traj": self.max_steps,
            "exploration_type": b["exploration_type"],
            "trajs_per_batch": self.num_trajectories,
            "traj_format": "cat",
            **b["collector_kwargs"],
        }
        if self.backend == "process":
            from torchrl_lite.collectors.multi import MultiSyncDataCollector

            return MultiSyncDataCollector([b["env"]], b["policy_factory"](), **common)
        from torchrl_lite.collectors.collectors import SyncDataCollector

        env = b["env"]
        if callable(env) and not hasattr(env, "reset"):
            env = env()
        policy = b["policy"] if b["policy"] is not None else b["policy_factory"](env)
        cls = b["collector_cls"] or SyncDataCollector
        if isinstance(cls, str):  # a collector class by name, from the modules defining them
            from torchrl_lite.collectors import collectors, multi

            found = getattr(collectors, cls, None) or getattr(multi, cls, None)
            if not isinstance(found, type):
                raise ValueError(f"Evaluator: collector_cls={cls!r} names no collector class.")
            cls = found
        return cls(env, policy, policy_device=b["device"], **common)

    def _run(self, weights, step: int) -> dict:
        self._check_open()
        with self._lock:
            if self._collector is None:
                self._collector = self._make_collector()
            collector = self._collector
            if weights is not None:
                collector.update_policy_weights_(weights)
            collector.reset()  # fresh episodes, with these weights
            start = time.perf_counter()
            episodes = collector.next()
            seconds = time.perf_counter() - start
            if self.dump_video and self.backend == "thread":
                _dump_videos(collector.env, step)
        return self._metrics(episodes, seconds, step)

    def _run_and_notify(self, weights, step: int) -> dict:
        result = self._run(weights, step)
        self._notify(result)
        return result

    def _metrics(self, episodes: TensorDictBase, seconds: float, step: int) -> dict:
        ids = episodes.get(("collector", "traj_ids")).reshape(-1)
        starts = torch.ones_like(ids, dtype=torch.bool)
        starts[1:] = ids[1:] != ids[:-1]
        bounds = starts.nonzero().squeeze(-1).tolist() + [ids.numel()]
        returns, lengths = [], []
        for a, b in zip(bounds[:-1], bounds[1:]):
            episode = episodes[a:b]
            ret = episode.get(_EPISODE_RETURN, None)
            if ret is not None:
                returns.append(float(ret[-1].sum()))
            else:
                returns.append(float(episode.get(self.reward_keys).sum()))
            count = episode.get(_STEP_COUNT, None)
            lengths.append(float(count[-1].sum()) if count is not None else float(b - a))
        rewards = torch.tensor(returns, dtype=torch.float64)
        p = self.log_prefix
        out = {
            f"{p}/reward": float(rewards.mean()),
            f"{p}/reward_std": float(rewards.std()) if len(returns) > 1 else 0.0,
            f"{p}/num_episodes": len(returns),
            f"{p}/episode_length": sum(lengths) / len(lengths),
            f"{p}/fps": ids.numel() / seconds if seconds > 0 else float("nan"),
        }
        if self.metrics_fn is not None:
            for name, value in self.metrics_fn(episodes).items():
                out[f"{p}/{name}"] = value
        out[f"{p}/step"] = step
        return out

    def _notify(self, result: dict) -> None:
        if self.on_result is None:
            return
        try:
            self.on_result(TensorDict({k: torch.as_tensor(v) for k, v in result.items()}, []))
        except Exception:
            logger.warning("Evaluator: the on_result callback failed", exc_info=True)


def _snapshot(weights):
    """A detached copy of the weights (a module is read as a TensorDict of its weights)."""
    if isinstance(weights, torch.nn.Module):
        weights = TensorDict.from_module(weights)
    if isinstance(weights, TensorDictBase):
        return weights.detach().clone()
    return {k: v.detach().clone() for k, v in weights.items()}


def _dump_videos(env, step: int) -> None:
    from torchrl_lite.envs.transforms import Compose
    from torchrl_lite.record.recorder import VideoRecorder

    transform = getattr(env, "transform", None)
    transforms = list(transform.transforms) if isinstance(transform, Compose) else [transform]
    for t in transforms:
        if isinstance(t, VideoRecorder):
            t.dump(step=step)
