"""A two-node Ray cluster simulated on this machine (one CPU per node): collection workers
on both nodes (the head node's through the shared-memory channel, the other's through Ray
calls), one node removed mid-run, the Learner going on, the worker back when a node
returns."""

import time

import pytest

from tests.scheme import doubles
from tests.scheme.conftest import init_session_ray
from torchrl_lite import Learner
from torchrl_lite.scheme import Scheme

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # starts its own 2-node cluster

_STORE = 100 * 1024**2


def test_scheme_two_node_cluster_node_lost(ray_session):
    ray = ray_session
    from ray.cluster_utils import Cluster

    ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "include_dashboard": False, "object_store_memory": _STORE},
    )
    node = cluster.add_node(num_cpus=1, object_store_memory=_STORE)
    learner = None
    try:
        ray.init(address=cluster.address)
        cluster.wait_for_nodes()
        scheme = Scheme(**doubles.factories(), col_remote_workers=2, worker_timeout=120)
        group = scheme.local.collection.group
        nodes = ray.get([group.call(i, "node_id") for i in range(2)])
        assert len(set(nodes)) == 2  # one worker per node (1 CPU each)
        # the worker on the driver's (head) node gets the shared-memory channel, the other
        # one Ray calls
        head = ray.get_runtime_context().get_node_id()
        assert [c is not None for c in group.channels] == [n == head for n in nodes]
        learner = Learner(scheme, target_steps=10_000)
        for _ in range(4):
            learner.step()
        lost = nodes.index(node.node_id)
        cluster.remove_node(node)
        frames = learner.frames
        for _ in range(12):  # goes on with the healthy worker; the lost one cannot restart
            learner.step()
        m = learner.get_metrics()
        assert m["col_alive"] == 1 and m["restarts"] == 1
        assert learner.frames - frames >= 3 * 40  # rounds of one worker's 40 frames
        assert any(f"collection worker {lost} failed" in e for e in learner.events)
        cluster.add_node(num_cpus=1, object_store_memory=_STORE)  # capacity is back
        deadline = time.monotonic() + 120
        while learner.get_metrics()["col_alive"] < 2 and time.monotonic() < deadline:
            learner.step()
        assert learner.get_metrics()["col_alive"] == 2
        assert any(f"collection worker {lost} restarted and rejoined" in e for e in learner.events)
    finally:
        if learner is not None:
            learner.close()
        ray.shutdown()
        cluster.shutdown()
        init_session_ray()  # the suite's session, for the tests that follow
