"""Data collectors: run a policy in an env and hand out batches of steps.

``DataCollectorBase`` (``_base.py``) holds what every collector shares: the frame budget,
iteration, delivery and policy-weight checks.

``SyncDataCollector`` steps one env (which may be batched: ``GymEnv(num_envs=...)``,
``SerialEnv``, ``ParallelEnv``) in this process. Its hot loop per step: the policy
(under ``torch.no_grad()`` and the exploration type), the env's ``_step``, a new root for
the next step, and a reference kept to the step's TensorDict; every few steps the leaves
are copied into ``[T, *batch]`` buffers allocated once (``envs/_rollout.py``, the
recorder ``EnvBase.rollout`` uses too).
Sub-envs that are done are reset alone. The multiprocess collectors (``multi.py``) run one
``SyncDataCollector`` per worker process.
"""

from __future__ import annotations

import copy
import warnings

import torch
from tensordict import TensorDictBase
from torch import nn

from torchrl_lite import _keys as K
from torchrl_lite import _td
from torchrl_lite.collectors._args import (
    build_env,
    check_int,
    check_policy,
    check_policy_inputs,
    param_device,
    to_one_hot,
)
from torchrl_lite.collectors._base import DataCollectorBase
from torchrl_lite.collectors._checks import check_first_actions
from torchrl_lite.collectors._compile import compile_policy_in_place
from torchrl_lite.collectors._dispatch import BackendDispatch
from torchrl_lite.collectors._fast_batch import fast_batch
from torchrl_lite.collectors._policy import (
    copy_weights,
    has_lazy_params,
    materialize_lazy,
    policy_weights,
    recurrent_specs,
    register_policy_transforms,
)
from torchrl_lite.collectors._step_parts import _merge_preset, _with_compact_obs
from torchrl_lite.collectors._version import make_tracker
from torchrl_lite.envs._rollout import StepRecorder
from torchrl_lite.envs._step_checks import check_step_output
from torchrl_lite.envs.utils import (
    ExplorationType,
    check_batch_bounds,
    next_root_entries,
    set_exploration_type,
    step_mdp,
)

__all__ = ["DataCollectorBase", "SyncDataCollector", "Collector"]

_DROP_ROOT = frozenset({K.NEXT, K.RESET})  # root entries never carried to the next step
# what runs on from one batch to the next (attributes ``_<name>``, in ``state_dict()["carry"]``)
_STEP_COUNT = "step_count"  # recorded with max_frames_per_traj, as TorchRL's StepCounter
_CARRY = ("td", "traj_ids", "traj_count", "traj_stride", "traj_offset", "step_count")


class SyncDataCollector(DataCollectorBase, metaclass=BackendDispatch):
    """Collect batches of steps from an env with a policy, in this process.

    Each batch holds ``frames_per_batch`` frames as a ``[*env.batch_size, T]`` TensorDict
    (``T = frames_per_batch / n_envs``): the root entries the policy saw and wrote (its
    extra outputs, e.g. ``"loc"``, ``"sample_log_prob"`` or recurrent states, are kept),
    the step's results under ``"next"``, and ``("collector", "traj_ids")``. A trajectory
    cut by the batch boundary keeps its id in the next batch. Sub-envs that are done are
    reset alone. Recurrent policies (``LSTMModule``/``GRUModule`` inside) need no primer:
    the collector starts their hidden states at zero, resets them with their sub-env and
    writes ``"is_init"`` when the env does not. For a flat ``[n_envs * T]`` batch, pass
    ``postproc=lambda td: td.reshape(-1)``.

    Args:
        create_env_fn: an env, or a callable returning one (called with
            ``create_env_kwargs``).
        policy: a TensorDict module (or callable ``TensorDict -> TensorDict``) writing
            ``"action"``; ``None`` draws random actions from the env's action spec. Its
            output is checked against the action spec on the first batch.
        frames_per_batch: frames per batch, a multiple of the number of envs.
        total_frames: frames to collect in all; ``-1`` for endless collection.
        device: the default of ``policy_device`` and ``storing_device`` (the env stays on
            the device it was created on; steps move between the devices).
        storing_device: where batches are stored (default: the env's device).
        policy_device: where the policy runs (default: where its parameters are); a copy
            of the policy is moved there if needed (``update_policy_weights_()`` syncs it).
        env_device: the env's device, if given checked against the env (envs are created
            on their device, e.g. ``GymEnv(..., device=...)``).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: end trajectories after this many steps (sets
            ``("next", "truncated")`` and ``("next", "done")``) and record each step's
            count in ``"step_count"`` (0 after a reset) and ``("next", "step_count")``,
            as TorchRL's ``StepCounter`` does (an env that counts steps itself keeps
            its own count); ``None``: no limit.
        init_random_frames: collect the first frames (whole batches) with random actions.
        reset_at_each_iter: reset every env at the start of each batch.
        postproc: a callable applied to each batch (after ``split_trajs``).
        split_trajs: yield ``split_trajectories(batch)`` (``[n_traj, max_len]`` + mask).
        exploration_type: the exploration type while collecting (default ``RANDOM``).
        reset_when_done: reset done sub-envs (default True).
        replay_buffer: extend this buffer with each batch (flattened to the storage's
            dims) instead of yielding it; the iterator then yields ``None``.
        compile_policy: False, True or ``torch.compile`` options: compile the policy
            module in place (its weights stay shared).
        cudagraph_policy: False; True (or a dict of options) only without CUDA, where the
            policy runs as it is, with a warning (as TorchRL's wrapper does there).
        trust_policy: TorchRL's switch to skip wrapping the policy; accepted (a policy is
            used as given here).
        update_at_each_batch: call ``update_policy_weights_()`` before each batch.
        compact_obs: leave the observation and state entries out of each recorded step's
            ``"next"`` (they are the next step's root entries within a trajectory); a
            replay buffer's ``NextStateReconstructor`` rebuilds them at sampling.
        trajs_per_batch: yield batches of this many whole trajectories instead
            (``_trajs.py``): ``[N, max_len]`` with ``("collector", "mask")``, or flat with
            ``traj_format="cat"``. With a ``replay_buffer``, each finished trajectory is
            written to it flat.
        traj_format: ``"padded"`` (default) or ``"cat"``, with ``trajs_per_batch``.
        auto_register_policy_transforms: True: append ``InitTracker`` and the recurrent
            modules' primers to the env when its specs lack them, so the env alone (e.g.
            ``env.rollout``) feeds the policy too. Otherwise the collector supplies
            ``"is_init"`` and zero hidden states itself.
        track_policy_version: True or a ``PolicyVersion``: append the tracker to the env,
            so each frame carries ``"policy_version"``, bumped by each
            ``update_policy_weights_()`` (``_version.py``).
        backend, num_collectors, sync, backend_options: TorchRL's ``Collector`` selectors
            (``_dispatch.py``): ``backend="process"`` or ``num_collectors=N`` builds a
            multiprocess collector, ``backend="ray"`` a ``RayCollector``.

    Example:
        >>> from torchrl_lite.envs import GymEnv
        >>> collector = SyncDataCollector(GymEnv("Pendulum-v1"), None, frames_per_batch=50,
        ...     total_frames=100)
        >>> [data.batch_size for data in collector]
        [torch.Size([50]), torch.Size([50])]
        >>> collector.shutdown()
    """

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        create_env_fn,
        policy=None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        device=None,
        storing_device=None,
        policy_device=None,
        env_device=None,
        create_env_kwargs: dict | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc=None,
        split_trajs: bool = False,
        exploration_type=ExplorationType.RANDOM,
        reset_when_done: bool = True,
        replay_buffer=None,
        compile_policy=False,
        cudagraph_policy=False,
        trust_policy: bool = False,
        update_at_each_batch: bool = False,
        compact_obs: bool = False,
        trajs_per_batch: int | None = None,
        traj_format: str | None = None,
        auto_register_policy_transforms: bool | None = None,
        track_policy_version=False,
    ):
        owner = type(self).__name__
        self.policy_version_tracker = tracker = make_tracker(track_policy_version, owner)
        policy = compile_policy_in_place(policy, compile_policy, cudagraph_policy, owner)
        self._update_at_each_batch = bool(update_at_each_batch)
        self.compact_obs = bool(compact_obs)
        self._init_common(
            frames_per_batch,
            total_frames,
            init_random_frames,
            split_trajs,
            postproc,
            replay_buffer,
            trajs_per_batch,
            traj_format,
        )
        self.env = env = build_env(create_env_fn, create_env_kwargs, owner)
        try:
            if auto_register_policy_transforms:
                self.env = env = register_policy_transforms(env, policy)
            if tracker is not None:
                self.env = env = env.append_transform(tracker)
            n_envs = env.batch_size.numel()
            if frames_per_batch % n_envs:
                # TorchRL's behaviour: each env steps the same number of times per batch
                rounded = -(-frames_per_batch // n_envs) * n_envs
                warnings.warn(
                    f"{owner}: frames_per_batch={frames_per_batch} is not divisible by the "
                    f"number of envs, {n_envs} (env batch size {list(env.batch_size)}); each "
                    f"batch holds {rounded} frames. Pass a multiple of {n_envs} to silence this.",
                    UserWarning,
                    stacklevel=2,
                )
                frames_per_batch = self.frames_per_batch = rounded
            self._steps = frames_per_batch // n_envs
            if max_frames_per_traj is not None and max_frames_per_traj != -1:
                check_int("max_frames_per_traj", max_frames_per_traj, 1, owner)
            else:
                max_frames_per_traj = None
            if not isinstance(exploration_type, ExplorationType):
                raise TypeError(
                    f"{owner}: exploration_type must be an ExplorationType, got {exploration_type!r}"
                )
            self.max_frames_per_traj = max_frames_per_traj
            self.exploration_type = exploration_type
            self.reset_at_each_iter = bool(reset_at_each_iter)
            self.reset_when_done = bool(reset_when_done)
            if has_lazy_params(policy):  # lazy layers get their shapes from one reset
                materialize_lazy(check_policy(policy, owner), env)
            self._set_devices(policy, device, storing_device, policy_device, env_device)
            self._set_layout()
        except BaseException:
            if env is not create_env_fn:  # an env this collector made
                env.close()
            raise
        self._td = None  # the root of the next step (None: reset first)
        self._traj_ids = None
        self._traj_count, self._traj_stride, self._traj_offset = 0, 1, 0
        self._step_count = None
        self._recorder = StepRecorder(self._steps, "collector")
        self._checked = self.policy is None
        self._index_actions = {}  # {key: one-hot spec} the policy writes as indices
        self._random_defaults = None

    # -- construction ------------------------------------------------------------------
    def _set_devices(self, policy, device, storing_device, policy_device, env_device) -> None:
        owner, env = type(self).__name__, self.env
        device = torch.device(device) if device is not None else None
        env_device = torch.device(env_device) if env_device is not None else None
        if env_device is not None and env_device != env.device:
            raise ValueError(
                f"{owner}: env_device={env_device} but the env lives on {env.device}; create "
                f"the env on that device (e.g. GymEnv(..., device={str(env_device)!r}))."
            )
        policy = check_policy(policy, owner)
        params_on = param_device(policy)
        if policy_device is not None:
            policy_device = torch.device(policy_device)
        else:
            policy_device = device or params_on or env.device
        self._source_policy = None
        if params_on is not None and params_on != policy_device:
            self._source_policy = policy  # update_policy_weights_() copies from it
            policy = copy.deepcopy(policy).to(policy_device)
        self.policy = policy
        self.policy_device = policy_device
        self._cast = policy is not None and policy_device != env.device
        self.storing_device = torch.device(storing_device) if storing_device else device
        if self.storing_device is None:
            self.storing_device = env.device

    def _set_layout(self) -> None:
        """Keys and constant tensors the hot loop uses, decided once."""
        env = self.env
        batch, dev = env.batch_size, env.device
        env_keys = set(env.observation_spec.keys(True, True)) | set(env.state_spec.keys(True, True))
        specs = recurrent_specs(self.policy)
        # hidden states the env does not provide: zeros at reset, carried by the collector
        self._hidden = {
            k: spec.zero(batch).to(dev) for k, spec in specs.items() if k not in env_keys
        }
        reads_init = K.IS_INIT in list(getattr(self.policy, "in_keys", ()) or ())
        self._track_init = (reads_init or bool(specs)) and K.IS_INIT not in env_keys
        provided = env_keys | set(env.done_keys) | set(self._hidden)
        if self._track_init:
            provided.add(K.IS_INIT)
        check_policy_inputs(self.policy, provided, type(self).__name__)
        self._not_init = torch.zeros((*batch, 1), dtype=torch.bool, device=dev)
        self._all_init = torch.ones((*batch, 1), dtype=torch.bool, device=dev)
        reward_keys = list(env.full_reward_spec.keys(True, True))
        action_keys = list(env.full_action_spec.keys(True, True))
        self._flat_keys = all(isinstance(k, str) for k in reward_keys + action_keys)
        self._reward_keys, self._action_keys = reward_keys, action_keys
        self._drop_next = frozenset(reward_keys)
        self._drop_root = _DROP_ROOT | set(reward_keys) | set(action_keys)
        self._done_keys = set(env.done_keys)
        self._record_count = self.max_frames_per_traj is not None and _STEP_COUNT not in env_keys

    # -- the hot loop ------------------------------------------------------------------
    def _collect_batch(self, random: bool) -> TensorDictBase:  # noqa: C901 (the per-step loop kept in one frame: a call per step costs more than it reads)
        self._check_open()
        if self._update_at_each_batch:
            self.update_policy_weights_()
        if self._td is None or self.reset_at_each_iter:
            self._reset_all()
        env, rec = self.env, self._recorder
        env_step = env._step
        use_policy = not random and self.policy is not None
        defaults = self._defaults() if random and self.policy is not None else {}
        check = use_policy and not self._checked
        batched = bool(env.batch_size)
        truncating = self.max_frames_per_traj is not None
        next_root, reset_done = self._next_root, self._reset_done
        post_hook = _with_compact_obs(env) if self.compact_obs else env._post_step_mdp_hook()
        # after the first batch's checks, a plain TensorDictModule is called directly
        slow = check or self._cast or self._index_actions
        fast = None if slow else _td.module_caller(self.policy)
        policy_call = fast or self._policy_call
        if use_policy and not check and not self._cast and self._simple_steps():
            stepper = env._numpy_stepper()
            if stepper is not None:
                with torch.no_grad(), set_exploration_type(self.exploration_type):
                    batch = fast_batch(self, stepper, policy_call)
                if batch is not None:
                    check_batch_bounds(env, batch, time_dim=len(env.batch_size))
                    return batch
        td = self._td
        with torch.no_grad(), set_exploration_type(self.exploration_type):
            for t in range(self._steps):
                if use_policy:
                    before = set(td.keys(True, True)) if check else None
                    td = policy_call(td)
                    if check:
                        self._check_action(td, before)
                else:
                    td = env.rand_action(td)
                preset = _td.get(td, K.NEXT)  # the policy's ("next", ...) entries
                next_td = env_step(td)
                if not self.__dict__.get("_output_checked"):  # once: _step against the specs
                    check_step_output(env, next_td)
                    self._output_checked = True
                if preset is not None:
                    _merge_preset(next_td, preset)
                if truncating:
                    self._truncate(next_td)
                _td.set(td, K.NEXT, next_td)
                root = next_root(td, next_td)
                if post_hook is not None:  # e.g. NextObservationDelta edits the recorded step
                    post_hook(td, root)
                ids = self._traj_ids
                if t == 0:
                    rec.begin(td, ids, defaults)
                rec.record(td, ids)
                done = _td.get(next_td, K.DONE)
                if done is None:
                    raise KeyError(
                        f"The env's step returned no 'done': {list(next_td.keys(True, True))}"
                    )
                td = root
                if self.reset_when_done and (bool(done.any()) if batched else bool(done)):
                    td = reset_done(td, done)
        if check:
            self._checked = True
        self._td = td
        batch = rec.result(env.batch_size, self.storing_device)
        if use_policy:  # an action beyond its bounds on any step (random ones are in)
            check_batch_bounds(env, batch, time_dim=len(env.batch_size))
        return batch

    def _simple_steps(self) -> bool:
        """True if a step needs nothing but the env and the policy (no recurrent states,
        ``is_init`` tracking or truncation): then the env's numpy stepper can run it."""
        return (
            self.max_frames_per_traj is None
            and not self._hidden
            and not self._track_init
            and self.reset_when_done
            and self._td is not None
            and not self.compact_obs
        )

    def _policy_call(self, td: TensorDictBase) -> TensorDictBase:
        if self._cast:
            out = self.policy(td.to(self.policy_device))
            out = out.to(self.env.device) if out is not None else None
        else:
            out = self.policy(td)
        if self._index_actions and out is not None:
            to_one_hot(out, self._index_actions)
        return out

    def _next_root(self, td: TensorDictBase, next_td: TensorDictBase) -> TensorDictBase:
        """``step_mdp``: the step's ``"next"`` entries (minus the reward) and the root's
        other entries (minus the action), in a new TensorDict."""
        root, nxt = _td.entries(td), _td.entries(next_td)
        if not (self._flat_keys and root is not None and nxt is not None):
            out = step_mdp(td, reward_keys=self._reward_keys, action_keys=self._action_keys)
        else:
            entries = next_root_entries(root, nxt, self._drop_next, self._drop_root)
            out = _td.new(entries, td.batch_size, td.device)
        if self._track_init:
            _td.set(out, K.IS_INIT, self._not_init)
        return out

    def _truncate(self, next_td: TensorDictBase) -> None:
        count = self._step_count = self._step_count + 1  # new: recorded steps keep theirs
        if self._record_count:
            next_td.set(_STEP_COUNT, count)
        hit = count >= self.max_frames_per_traj
        if bool(hit.any()):
            for key in (K.TRUNCATED, K.DONE):
                if key in self._done_keys or key == K.DONE:
                    flag = next_td.get(key, None)
                    next_td.set(key, hit.clone() if flag is None else flag | hit)

    # -- resets and trajectory ids ---------------------------------------------------------
    def _new_trajectories(self, mask: torch.Tensor | None) -> None:
        """Give new ids to the sub-envs in ``mask`` (``[*batch]`` bool; None: all)."""
        batch, dev = self.env.batch_size, self.env.device
        n = batch.numel() if mask is None else int(mask.sum())
        new = (torch.arange(n, device=dev) + self._traj_count) * self._traj_stride
        new += self._traj_offset
        self._traj_count += n
        if mask is None:
            self._traj_ids = new.reshape(batch)
        else:
            ids = self._traj_ids.clone()  # the old tensor is referenced by recorded steps
            ids[mask] = new
            self._traj_ids = ids

    def _reset_all(self) -> None:
        env = self.env
        td = env.reset()
        self._new_trajectories(None)
        if self.max_frames_per_traj is not None:
            self._step_count = torch.zeros(
                (*env.batch_size, 1), dtype=torch.int64, device=env.device
            )
            if self._record_count:
                td.set(_STEP_COUNT, self._step_count)
        for key, zero in self._hidden.items():
            td.set(key, zero)
        if self._track_init:
            td.set(K.IS_INIT, self._all_init)
        self._td = td

    def _reset_done(self, td: TensorDictBase, done: torch.Tensor) -> TensorDictBase:
        env = self.env
        if env.batch_size:
            td.set(K.RESET, done.clone())
            td = env.reset(td)
            mask = done.reshape(env.batch_size)
        else:
            td = env.reset(td)
            mask = None
        self._new_trajectories(mask)
        if self._step_count is not None:
            self._step_count = self._step_count.masked_fill(done.reshape(self._step_count.shape), 0)
            if self._record_count:
                td.set(_STEP_COUNT, self._step_count)
        for key, zero in self._hidden.items():
            if mask is None:
                td.set(key, zero)
            else:
                m = mask.reshape(*mask.shape, *([1] * (zero.dim() - mask.dim())))
                td.set(key, torch.where(m, zero, td.get(key)))
        if self._track_init:
            td.set(K.IS_INIT, self._all_init if mask is None else done.clone())
        return td

    # -- checks ------------------------------------------------------------------------
    def _check_action(self, td, before: set) -> None:
        check_first_actions(self, td, before)

    def _defaults(self) -> dict:
        """Zeros for the policy's outputs, recorded in random-policy steps so that every
        batch has the same entries (found by running the policy once, RNG untouched)."""
        if self._random_defaults is None:
            probe = self._td.clone()
            before = set(probe.keys(True, True))
            cuda = [self.policy_device.index or 0] if self.policy_device.type == "cuda" else []
            with (
                torch.random.fork_rng(devices=cuda),
                torch.no_grad(),
                set_exploration_type(self.exploration_type),
            ):
                out = self._policy_call(probe)
            skip = before | set(self._action_keys)
            self._random_defaults = {
                k: torch.zeros_like(out.get(k)) for k in out.keys(True, True) if k not in skip
            }
        return self._random_defaults

    # -- the rest of the interface ---------------------------------------------------------
    def update_policy_weights_(self, weights=None) -> None:
        """Copy new weights into the collector's policy.

        Args:
            weights: a TensorDict (``TensorDict.from_module(policy)``), a ``state_dict`` or
                a module of the same architecture. ``None``: the policy given at
                construction is used by reference (nothing to do), or, if the collector
                runs a copy on another device, the copy is synced from it.
        """
        self._check_open()
        owner = type(self).__name__
        target = policy_weights(self.policy)
        if weights is None:
            if self._source_policy is not None:
                copy_weights(target, policy_weights(self._source_policy), owner)
        elif target is None:
            raise ValueError(f"{owner}: the policy ({self.policy!r}) has no weights to update.")
        else:
            copy_weights(target, weights, owner)
        self.increment_version()  # frames from now on come from the new weights

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seed the env (each sub-env gets its own seed) and return the next unused seed.

        The next batch starts from a reset, so that the seed takes effect.
        """
        self._check_open()
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._td = None
        return out

    def reset(self) -> None:
        """Start fresh episodes: the next batch begins with a reset of every env, and
        trajectories held for ``trajs_per_batch`` are dropped."""
        self._check_open()
        super().reset()
        self._td = None

    def state_dict(self) -> dict:
        """What continuing this collection exactly needs: counters, policy, env, carry.

        ``"frames"``/``"iter"`` (the counters), ``"policy_state_dict"`` (when the policy is
        an ``nn.Module``), ``"env_state_dict"`` (``env.state_dict()``: RNG and internal
        state) and ``"carry"``: what runs on from one batch to the next (the root
        TensorDict of the next step, trajectory ids and counters, step counts), copied.
        A collector built the same way that loads it yields the same next batches.

        Example:
            >>> from torchrl_lite.envs import PendulumEnv
            >>> collector = SyncDataCollector(PendulumEnv(seed=0), None, frames_per_batch=4)
            >>> _ = collector.next()
            >>> sorted(collector.state_dict())
            ['carry', 'env_state_dict', 'frames', 'iter']
        """
        out = {"frames": self._frames, "iter": self._iter}
        if isinstance(self.policy, nn.Module):
            out["policy_state_dict"] = self.policy.state_dict()
        out["env_state_dict"] = self.env.state_dict()
        out["carry"] = {name: _copy(getattr(self, "_" + name)) for name in _CARRY}
        if self.policy_version_tracker is not None:
            out["policy_version"] = self.policy_version
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore what ``state_dict()`` returned (into a collector built the same way)."""
        known = {"frames", "iter", "policy_state_dict", "env_state_dict", "carry", "policy_version"}
        unknown = [k for k in state_dict if k not in known]
        if unknown:
            raise KeyError(
                f"{type(self).__name__}.load_state_dict: unknown entries {unknown}; expected "
                f"those of a collector's state_dict(): {sorted(known)}."
            )
        carry = state_dict.get("carry", {})
        odd = [k for k in carry if k not in _CARRY]
        if odd:
            raise KeyError(
                f"{type(self).__name__}.load_state_dict: unknown carry entries {odd}; "
                f"expected {list(_CARRY)}."
            )
        if "policy_state_dict" in state_dict:
            self.policy.load_state_dict(state_dict["policy_state_dict"])
        if "env_state_dict" in state_dict:
            self.env.load_state_dict(state_dict["env_state_dict"])
        for name, value in carry.items():  # onto the env's device (a checkpoint loads on CPU)
            setattr(self, "_" + name, _copy(value, self.env.device))
        self._frames = int(state_dict.get("frames", self._frames))
        self._iter = int(state_dict.get("iter", self._iter))
        if "policy_version" in state_dict and self.policy_version_tracker is not None:
            self.policy_version_tracker.version = state_dict["policy_version"]

    def shutdown(self) -> None:
        """Close the env; the collector cannot be used afterwards."""
        if not self.closed and not self.env.is_closed:
            self.env.close()
        self.closed = True

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env!r}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames})"
        )


Collector = SyncDataCollector


def _copy(value, device=None):
    """A copy of a tensor or TensorDict, on ``device`` if given (other values: as they are)."""
    if not isinstance(value, (torch.Tensor, TensorDictBase)):
        return value
    return value.clone() if device is None or value.device == device else value.to(device)
