"""The driver <-> worker transport (collectors/distributed/transport.py): batches and
weights packed in one buffer and rebuilt equal; what cannot be packed travels unchanged;
the Scheme's remote collection sends weights only to workers that lack that version."""

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from tests.collectors.helpers import assert_same
from tests.scheme.conftest import ray_session  # noqa: F401 (the suite's one Ray session)
from torchrl_lite.collectors import SyncDataCollector
from torchrl_lite.collectors.distributed.ray_workers import WorkerGroup
from torchrl_lite.collectors.distributed.transport import (
    INLINE_BYTES,
    Packed,
    open_result,
    pack,
    result_message,
    unpack,
    weights_message,
)
from torchrl_lite.envs import PendulumEnv
from torchrl_lite.scheme.collection import RemoteCollection


def _batch():
    collector = SyncDataCollector(PendulumEnv(seed=1), None, frames_per_batch=50)
    batch = collector.next()
    collector.shutdown()
    return batch


def test_a_collector_batch_comes_back_equal_with_its_layout():
    batch = _batch()
    packed = pack(batch)
    assert type(packed) is Packed and type(packed.buffer) is bytes
    back = unpack(packed)
    assert type(back) is TensorDict
    assert back.batch_size == batch.batch_size and back.device == batch.device
    assert set(back.keys(True, True)) == set(batch.keys(True, True))
    for key in batch.keys(True, True):
        assert back[key].dtype == batch[key].dtype, key
    assert_same(back, batch, skip_prefix=())


def test_unpacked_tensors_are_writable_copies():
    batch = _batch()
    packed = pack(batch)
    back = unpack(packed)
    back["observation"].zero_()  # writes into the unpacked copy only
    assert (batch["observation"] != 0).any()
    again = unpack(packed)
    assert torch.equal(again["observation"], batch["observation"])


def test_odd_tensors_round_trip():
    td = TensorDict(
        {
            "scalar": torch.zeros(3),  # [3]: one value per batch element
            "empty": torch.zeros(3, 0),
            "strided": torch.arange(18.0).reshape(3, 6)[:, ::2],  # not contiguous
            "half": torch.randn(3, 2).to(torch.bfloat16),
            "double": torch.randn(3, 1, dtype=torch.float64),
            "flags": torch.tensor([True, False, True]),
            "nested": {"deeper": {"ids": torch.arange(3 * 4).reshape(3, 4)}},
        },
        [3],
    )
    back = unpack(pack(td))
    for key in td.keys(True, True):
        assert back[key].dtype == td[key].dtype and torch.equal(back[key], td[key]), key
    assert back["nested"].batch_size == torch.Size([3])


def test_a_state_dict_comes_back_as_a_dict():
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    state = net.state_dict()
    back = unpack(pack(state))
    assert type(back) is dict and list(back) == list(state)
    for key, value in state.items():
        assert back[key].dtype == value.dtype and torch.equal(back[key], value), key
    net.load_state_dict(back)  # loads as the original


@pytest.mark.parametrize(
    "obj",
    [
        LazyStackedTensorDict(TensorDict({"a": torch.zeros(2)}, []), TensorDict({}, [])),
        TensorDict({"a": torch.zeros(2, 1), "text": NonTensorData("hi", batch_size=[2])}, [2]),
        TensorDict({"a": torch.zeros(2, 1)}, [2], names=["time"]),
        TensorDict({"a": torch.zeros(2, 1, device="meta")}, [2]),
        {1: torch.zeros(1)},
        [torch.zeros(1)],
        None,
        b"user bytes",
    ],
    ids=[
        "lazy-stack",
        "non-tensor",
        "dim-names",
        "other-device",
        "int-key",
        "list",
        "none",
        "bytes",
    ],  # fmt: skip
)
def test_what_cannot_be_packed_travels_unchanged(obj):
    assert pack(obj) is obj
    assert unpack(obj) is obj


def test_small_weights_are_sent_inline():
    weights = TensorDict.from_module(torch.nn.Linear(3, 4)).data
    message = weights_message(weights)
    assert type(message) is bytes and len(message) < INLINE_BYTES  # one sealed object
    back = unpack(message)
    assert torch.equal(back["weight"], weights["weight"])
    weights["weight"].add_(1.0)  # the message is a copy: later changes are not in it
    assert not torch.equal(unpack(message)["weight"], weights["weight"])


@pytest.mark.parametrize("frames", [50, 100_000], ids=["sealed-bytes", "numpy-buffer"])
def test_a_worker_result_comes_back_equal(frames):
    batch = TensorDict({"obs": torch.randn(frames, 3), "next": {"done": torch.zeros(frames, 1,
                        dtype=torch.bool)}}, [frames])  # fmt: skip
    meta = {"frames": frames, "returns": [1.5]}
    message = result_message(batch, meta)
    assert type(message) is (bytes if frames == 50 else tuple)  # large: zero-copy numpy
    got, got_meta = open_result(message)
    assert got_meta == meta
    assert_same(got, batch, skip_prefix=())
    assert open_result((batch, meta))[0] is batch  # an in-process result passes through


class _Group:
    """A stand-in for ``WorkerGroup`` (its weights bookkeeping, no Ray): records each
    ``collect`` call's weights argument."""

    needs_weights = WorkerGroup.needs_weights
    forget_weights = WorkerGroup.forget_weights

    def __init__(self, count):
        self.count, self.timeout = count, 10.0
        self.restarts = [0] * count
        self.ready_flags = [True] * count
        self.sent: list = []
        self._held: dict = {}

    def wait_ready(self):
        return list(range(self.count))

    def call(self, index, method, weights=None, version=0, *args):
        self.sent.append((index, weights))
        return (index, version)

    def gather(self, refs):
        batch = pack(TensorDict({"x": torch.full((2, 1), float(len(self.sent)))}, [2]))
        return {i: (batch, {"version": version}) for i, (_, version) in refs.items()}


def test_remote_collection_sends_each_weights_version_once_per_worker():
    group = _Group(2)
    collection = RemoteCollection(group, synchronous=True)
    made = []

    def weights_fn():
        made.append(1)
        return "weights"

    out = collection.collect(weights_fn, version=0)
    assert [type(batch) for batch, _ in out] == [TensorDict, TensorDict]  # unpacked
    assert group.sent == [(0, "weights"), (1, "weights")]
    group.sent.clear()
    collection.collect(weights_fn, version=0)  # same version: not sent again
    assert group.sent == [(0, None), (1, None)]
    group.sent.clear()
    group.restarts[1] = 1  # worker 1 was restarted: it gets the weights again
    collection.collect(weights_fn, version=0)
    assert group.sent == [(0, None), (1, "weights")]
    group.sent.clear()
    collection.collect(weights_fn, version=1)  # a new version reaches both
    assert group.sent == [(0, "weights"), (1, "weights")]
    group.sent.clear()
    collection.load_state_dict({"remote": {}})  # a resume: the workers' versions changed
    collection.collect(weights_fn, version=1)
    assert group.sent == [(0, "weights"), (1, "weights")]


# -- through Ray ----------------------------------------------------------------------------
def _mlp_policy(hidden):
    from tensordict.nn import TensorDictModule

    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, hidden),
        torch.nn.Tanh(), torch.nn.Linear(hidden, 1), torch.nn.Tanh(),
    )  # fmt: skip
    return TensorDictModule(net, in_keys=["observation"], out_keys=["action"])


@pytest.mark.ray
@pytest.mark.parametrize("hidden", [8, 128], ids=["inline-weights", "object-store-weights"])
def test_ray_collector_batches_equal_a_local_collector(ray_session, hidden):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    policy = _mlp_policy(hidden)
    nbytes = sum(p.numel() * 4 for p in policy.parameters())
    assert (nbytes < INLINE_BYTES) == (hidden == 8)  # both ways of sending weights
    local = SyncDataCollector(PendulumEnv, policy, frames_per_batch=30)
    local.set_seed(5)
    remote = RayCollector(PendulumEnv, policy, frames_per_batch=30, num_collectors=1, seed=5)
    for i in range(3):
        if i == 2:  # new weights: the local collector uses the policy itself, Ray a copy
            with torch.no_grad():
                policy.module[0].weight.mul_(-1.0)
            remote.update_policy_weights_()
        got, expected = remote.next(), local.next()
        assert type(got) is TensorDict and got["observation"].is_contiguous()
        assert_same(got, expected, skip_prefix=())
    remote.shutdown()
    local.shutdown()


@pytest.mark.ray
def test_ray_collector_sends_weights_only_when_they_change(ray_session):  # noqa: F811
    from torchrl_lite.collectors.distributed import RayCollector

    collector = RayCollector(PendulumEnv, _mlp_policy(8), frames_per_batch=20, num_collectors=2)
    sent = []
    call = collector.group.call

    def spy(index, method, *args):
        if method == "collect":
            sent.append((index, args[0] is not None))
        return call(index, method, *args)

    collector.group.call = spy
    collector.next()  # the weights of construction reach both workers with their first batch
    collector.next()
    collector.update_policy_weights_()
    collector.next()
    assert sent == [(0, True), (1, True), (0, False), (1, False), (0, True), (1, True)]
    collector.shutdown()
