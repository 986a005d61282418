"""The Scheme as a Python object (one Ray session of 2 CPUs): workers freed when it is no
longer referenced, several Schemes in turn in one process without ``close()`` (the seed's
script body with three layouts, a notebook cell run again), a live one named when it
holds the CPUs, context managers and an idempotent ``close()``. Ray's own count of free
CPUs is the reference for "freed"."""

import gc
import re
import time
import weakref

import pytest

from tests.scheme import doubles
from torchrl_lite import Learner
from torchrl_lite.collectors.distributed.ray_session import ResourcesHeldError
from torchrl_lite.scheme import Scheme

pytestmark = pytest.mark.ray
ray = pytest.importorskip("ray", reason="the distributed tests need ray")


def _free_cpus(ray_session, want: float, within: float = 15.0) -> float:
    """Ray's free CPUs once they reach ``want`` (or after ``within`` seconds)."""
    deadline = time.monotonic() + within
    while True:
        free = ray_session.available_resources().get("CPU", 0.0)
        if free >= want or time.monotonic() > deadline:
            return free
        time.sleep(0.1)


def _deferred(events) -> bool:
    return any("the workers start at the first step" in e for e in events)


def test_unreferenced_scheme_frees_its_workers_at_once(ray_session):
    """Nothing in a Scheme points back at it: the last reference gone, CPython frees it
    (no garbage collection) and its finaliser kills the actors."""
    gc.disable()
    try:
        learner = Learner(Scheme(**doubles.factories(), col_remote_workers=2), 10_000)
        learner.step()
        assert _free_cpus(ray_session, 2.0, within=0.0) == 0.0
        alive = weakref.ref(learner.scheme)
        del learner
        assert alive() is None  # freed by reference counting, no gc.collect()
    finally:
        gc.enable()
    assert _free_cpus(ray_session, 2.0) == 2.0


def test_seed_script_body_three_layouts_in_one_process_without_close(ray_session, tmp_path):
    """The seed's script body (names swapped, Pendulum-v1, small sizes) run three times in
    one process, 2 sync then 2 async collection workers, then 2 gradient workers, each
    needing both CPUs; no close(): each Scheme frees the previous one's CPUs by replacing
    it."""
    from torchrl_lite.agent.actors import OnPolicyActor, get_feature_extractor
    from torchrl_lite.agent.algos import PPO
    from torchrl_lite.agent.env import VecEnv
    from torchrl_lite.agent.storages import OnPolicyGAEBuffer
    from torchrl_lite.envs import gym_train_env_factory

    layouts = [(2, "synchronous", 1), (2, "asynchronous", 1), (1, "synchronous", 2)]
    trained = []
    for run, (col_workers, col_communication, grad_workers) in enumerate(layouts):
        train_envs_factory, action_space, obs_space = VecEnv.create_factory(
            vec_env_size=1, env_fn=gym_train_env_factory, env_kwargs={"env_id": "Pendulum-v1"}
        )
        algo_factory = PPO.create_factory(
            lr=1e-4, num_epochs=4, clip_param=0.2, entropy_coef=0.01,
            value_loss_coef=.5, max_grad_norm=.5, num_mini_batch=4,
            use_clipped_value_loss=True, gamma=0.99)  # fmt: skip
        storage_factory = OnPolicyGAEBuffer.create_factory(size=50, gae_lambda=0.95)
        actor_factory = OnPolicyActor.create_factory(
            obs_space, action_space, feature_extractor_network=get_feature_extractor("MLP")
        )
        scheme_parameters = {
            "algo_factory": algo_factory,
            "actor_factory": actor_factory,
            "storage_factory": storage_factory,
            "train_envs_factory": train_envs_factory}  # fmt: skip
        scheme_parameters.update({
            "col_remote_workers": col_workers,
            "col_communication": col_communication})  # fmt: skip
        scheme_parameters.update({
            "grad_remote_workers": grad_workers,
            "col_communication": col_communication})  # fmt: skip
        scheme = Scheme(**scheme_parameters)
        learner = Learner(scheme, target_steps=200, log_dir=tmp_path / str(run))
        iterations = 0
        while not learner.done():
            learner.step()
            if iterations % 1 == 0:
                learner.print_info()
            if iterations % 100 == 0:
                learner.save_model()
            iterations += 1
        m = learner.get_metrics()
        trained.append((m["frames"] >= 200, m["col_alive"], m["grad_alive"],
                        _deferred(learner.events)))  # fmt: skip
    # the second and third were built while the previous one was still referenced, so
    # they started their workers at their first step, once it had been replaced
    assert trained == [(True, 2, 1, False), (True, 2, 1, True), (True, 2, 2, True)]
    del scheme, learner
    assert _free_cpus(ray_session, 2.0) == 2.0


BUILD_CELL = "learner = Learner(Scheme(**doubles.factories(), col_remote_workers=2), 120)"
TRAIN_CELL = """
while not learner.done():
    learner.step()
learner.print_info()
"""


def test_notebook_cell_run_again_reassigns_learner(ray_session):
    """A notebook's cells run in one namespace: the build cell run again replaces the
    Learner (and its Scheme) while the old one is still bound; training goes on."""
    namespace = {"Learner": Learner, "Scheme": Scheme, "doubles": doubles}
    frames = []
    for _ in range(3):  # the first run, then the cells run again twice
        exec(BUILD_CELL, namespace)
        exec(TRAIN_CELL, namespace)
        frames.append(namespace["learner"].frames)
    assert frames == [160, 160, 160]  # 2 workers x 40 frames a round, to >= 120
    assert _free_cpus(ray_session, 0.0, within=0.0) == 0.0  # the last one runs
    namespace.clear()
    assert _free_cpus(ray_session, 2.0) == 2.0


def test_live_scheme_holding_the_cpus_is_named(ray_session):
    """A second Scheme while the first is still referenced and running: built (its start
    waits for the first step), and that step names the first Scheme, where it was built
    and how to close it; once that one is closed, the second one starts."""
    first = Learner(Scheme(**doubles.factories(), col_remote_workers=2), target_steps=10_000)
    line = _line_of("first = Learner(Scheme(")
    try:
        first.step()
        second = Scheme(**doubles.factories(), col_remote_workers=2, worker_timeout=600)
        assert _deferred(message for _, message in second.events)
        with pytest.raises(ResourcesHeldError) as info:
            second.step()
        message = str(info.value)
        assert "request 2 CPU in all (col_worker_resources={'num_cpus': 1} x 2 workers)" in message
        assert "only 0 of the Ray cluster's 2 CPU are free" in message
        assert (
            "still running in this process: a Scheme (col_remote_workers=2, col_communication="
            f"'synchronous', grad_remote_workers=1) built at {__file__}:{line} (close it with "
            "learner.close() or scheme.shutdown(), or build it in a `with` block) holds 2 CPU"
        ) in message
        first.step()  # the first one is untouched
    finally:
        first.close()
    assert second.step()["frames"] == 80  # the first round of its 2 workers
    second.shutdown()


class _Holder:
    def ping(self):
        return 1


def test_cpus_held_by_other_actors_fail_at_construction(ray_session):
    """Actors that are not this process's Schemes hold the CPUs: nothing here can free
    them, so the Scheme fails at once (after Ray's grace period), saying so."""
    holder = ray_session.remote(num_cpus=2)(_Holder).remote()
    try:
        ray_session.get(holder.ping.remote())
        with pytest.raises(ResourcesHeldError, match="other actors hold the rest") as info:
            Scheme(**doubles.factories(), col_remote_workers=2)
        assert "only 0 of the Ray cluster's 2 CPU are free" in str(info.value)
        assert info.value.holders == []
    finally:
        ray_session.kill(holder)
    assert _free_cpus(ray_session, 2.0) == 2.0


def _line_of(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if line.strip().startswith(text))


def test_unreachable_scheme_in_a_reference_cycle_is_collected_first(ray_session):
    """A Scheme kept alive only by a cycle of the user's (here: the learner stored on its
    scheme) holds the CPUs until a garbage collection; a new Scheme runs one before
    failing, and starts at once."""
    gc.disable()  # no automatic collection: only the new Scheme's
    try:
        old = Learner(Scheme(**doubles.factories(), col_remote_workers=2), 10_000)
        old.step()
        old.scheme.learner = old  # a cycle
        alive = weakref.ref(old.scheme)
        del old
        assert alive() is not None and _free_cpus(ray_session, 2.0, within=0.0) == 0.0
        new = Scheme(**doubles.factories(), col_remote_workers=2)
        assert alive() is None and not _deferred(m for _, m in new.events)
        assert new.local.collection.group.alive == 2  # started at construction
        new.shutdown()
    finally:
        gc.enable()


def test_learner_and_scheme_as_context_managers(ray_session):
    with Learner(Scheme(**doubles.factories(), col_remote_workers=2), 10_000) as learner:
        learner.step()
        assert _free_cpus(ray_session, 2.0, within=0.0) == 0.0
    assert _free_cpus(ray_session, 2.0) == 2.0
    learner.close()  # idempotent
    with pytest.raises(RuntimeError, match=re.escape("Learner.step() after close()")):
        learner.step()
    with pytest.raises(KeyError):  # an error inside the block stops the workers too
        with Scheme(**doubles.factories(), col_remote_workers=2) as scheme:
            scheme.step()
            raise KeyError("on purpose")
    assert _free_cpus(ray_session, 2.0) == 2.0
    with pytest.raises(RuntimeError, match=re.escape("Scheme.step() after shutdown()")):
        scheme.step()
