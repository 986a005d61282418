"""``torchrl_lite.checkpoint`` used the way TorchRL's checkpointing tutorial and DQN script
use ``torchrl.checkpoint``."""

import json
import random

import numpy as np
import pytest
import torch

from torchrl_lite.checkpoint import (
    Checkpoint,
    CheckpointAdapter,
    CheckpointError,
    CheckpointOptions,
    CheckpointRotation,
    GlobalRNGState,
    StateDictCheckpointAdapter,
)
from torchrl_lite.data.replay_buffers import LazyTensorStorage, ReplayBuffer


def _net(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2)
    )


def _trained(seed=0):
    net = _net(seed)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    for _ in range(2):
        net(torch.randn(5, 4)).sum().backward()
        opt.step()
    return net, opt


def _same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k])


def test_roundtrip_restores_modules_optimizers_and_json(tmp_path):
    net, opt = _trained()
    progress = {"frames": 128}
    path = Checkpoint(policy=net, optimizer=opt, trainer_state=progress, config={"lr": 3e-4}).save(
        tmp_path / "step-128"
    )
    net2 = _net(1)
    opt2 = torch.optim.Adam(net2.parameters(), lr=1e-3)
    restored = {"frames": 0}
    result = Checkpoint(policy=net2, optimizer=opt2, trainer_state=restored).load(path)
    assert result.loaded == {"policy", "optimizer", "trainer_state"}
    assert result.unrequested == {"config"}
    _same_state(net, net2)
    ref, got = opt.state_dict(), opt2.state_dict()
    assert ref["param_groups"] == got["param_groups"]
    for k in ref["state"]:
        for name in ref["state"][k]:
            torch.testing.assert_close(ref["state"][k][name], got["state"][k][name])
    assert restored == {"frames": 128}  # a dict is refilled in place


def test_partial_load_reads_only_the_requested_component(tmp_path):
    net, opt = _trained()
    path = Checkpoint(policy=net, optimizer=opt, rng=GlobalRNGState()).save(tmp_path / "c")
    for f in (path / "components").iterdir():  # damage every other component's files
        if not f.name.endswith("policy"):
            for file in f.rglob("*"):
                if file.is_file():
                    file.write_bytes(b"garbage")
    net2 = _net(1)
    result = Checkpoint(policy=net2).load(path, components={"policy"}, map_location="cpu")
    assert result.loaded == {"policy"} and result.unrequested == {"optimizer", "rng"}
    _same_state(net, net2)


@pytest.mark.parametrize("payload", ["directory", "archive", "consolidated", "torch"])
@pytest.mark.parametrize("container", ["directory", "archive"])
def test_payload_formats_and_containers_roundtrip(tmp_path, payload, container):
    net, _ = _trained()
    path = tmp_path / "ckpt"
    Checkpoint(format=container).register(
        "policy", net, adapter=StateDictCheckpointAdapter(payload_format=payload)
    ).save(path)
    assert Checkpoint.manifest(path)["container"] == container
    assert path.is_dir() == (container == "directory")
    net2 = _net(3)
    Checkpoint().register("policy", net2, adapter=StateDictCheckpointAdapter()).load(path)
    _same_state(net, net2)


def test_global_rng_state_resumes_every_generator(tmp_path):
    torch.manual_seed(5)
    np.random.seed(5)
    random.seed(5)
    path = Checkpoint(rng=GlobalRNGState()).save(tmp_path / "rng")
    expected = (torch.rand(3), np.random.rand(3), random.random())
    torch.manual_seed(99)
    np.random.seed(99)
    random.seed(99)
    Checkpoint(rng=GlobalRNGState()).load(path)
    torch.testing.assert_close(torch.rand(3), expected[0])
    np.testing.assert_array_equal(np.random.rand(3), expected[1])
    assert random.random() == expected[2]


def test_replay_buffer_component_uses_its_own_dumps(tmp_path):
    rb = ReplayBuffer(storage=LazyTensorStorage(10))
    rb.extend(torch.arange(6.0).reshape(6, 1))
    path = Checkpoint(replay_buffer=rb).save(tmp_path / "rb")
    assert (
        Checkpoint.manifest(path)["components"]["replay_buffer"]["adapter"] == "torchrl.dump_load"
    )
    other = ReplayBuffer(storage=LazyTensorStorage(10))
    Checkpoint(replay_buffer=other).load(path)
    torch.testing.assert_close(other[:], rb[:])


class _Cursor:
    def __init__(self, offset=0):
        self.offset = offset


class _CursorAdapter(CheckpointAdapter):
    adapter_id = "test.cursor"

    def save(self, component, path, *, args, kwargs):
        path.mkdir(parents=True, exist_ok=True)
        (path / "cursor.json").write_text(json.dumps([component.offset, list(args), kwargs]))

    def load(self, component, path, *, map_location, tensor_load_kwargs, args, kwargs):
        component.offset = json.loads((path / "cursor.json").read_text())[0] + sum(args)


def test_custom_adapter_and_options(tmp_path):
    path = tmp_path / "cursor"
    options = CheckpointOptions(save_args=(1,), save_kwargs={"a": 2})
    Checkpoint().register("cursor", _Cursor(7), adapter=_CursorAdapter(), options=options).save(
        path
    )
    saved = json.loads(next((path / "components").glob("*cursor/cursor.json")).read_text())
    assert saved == [7, [1], {"a": 2}]
    restored = _Cursor()
    Checkpoint().register("cursor", restored, adapter=_CursorAdapter()).load(
        path, component_options={"cursor": CheckpointOptions(load_args=(10,))}
    )
    assert restored.offset == 17


def test_strictness_on_missing_and_incompatible_components(tmp_path):
    path = Checkpoint(a={"x": 1}).save(tmp_path / "c")
    ckpt = Checkpoint(a={}, b={})
    with pytest.raises(CheckpointError, match=r"missing \['b'\]") as info:
        ckpt.load(path)
    assert info.value.result.missing == {"b"}
    with pytest.warns(UserWarning, match=r"missing \['b'\]"):
        result = ckpt.load(path, strict="warn")
    assert result.loaded == {"a"} and ckpt.components["a"] == {"x": 1}
    assert Checkpoint(b={}, strict="ignore").load(path).missing == {"b"}
    wrong = Checkpoint().register("a", _Cursor(), adapter=_CursorAdapter())
    with pytest.raises(CheckpointError, match="saved by adapter 'torchrl.json'"):
        wrong.load(path)


def test_a_failed_save_leaves_the_previous_checkpoint(tmp_path):
    class Broken(CheckpointAdapter):
        adapter_id = "test.broken"

        def save(self, component, path, *, args, kwargs):
            raise OSError("disk full")

        def load(self, *a, **k):
            pass

    path = Checkpoint(value={"v": 1}).save(tmp_path / "c")
    bad = Checkpoint(value={"v": 2}).register("extra", object(), adapter=Broken())
    with pytest.raises(OSError, match="disk full"):
        bad.save(path)
    target = {}
    Checkpoint(value=target).load(path)
    assert target == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["c"]  # no leftovers


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda p: Checkpoint(format="zip"), ValueError, "format must be one of"),
        (lambda p: Checkpoint(strict="loud"), ValueError, "strict must be one of"),
        (
            lambda p: Checkpoint(a=object()).save(p / "x"),
            TypeError,
            "no way to save the component 'a'",
        ),
        (lambda p: Checkpoint(a={}).save(p / "x", components={"b"}), KeyError, "unregistered"),
        (lambda p: Checkpoint().register("a/b", {}), ValueError, "without '/'"),
        (lambda p: Checkpoint(a={}).register("a", {}), KeyError, "already registered"),
        (lambda p: Checkpoint.manifest(p / "none"), FileNotFoundError, "does not exist"),
        (lambda p: Checkpoint(a={}).save("s3://bucket/x"), ValueError, "local paths"),
    ],
)
def test_bad_arguments(tmp_path, call, error, match):
    with pytest.raises(error, match=match):
        call(tmp_path)


def test_save_refuses_to_replace_something_that_is_not_a_checkpoint(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="refusing to replace"):
        Checkpoint(a={}).save(tmp_path / "data")
    assert (tmp_path / "data" / "keep.txt").read_text() == "mine"


def test_rotation_keeps_the_last_and_the_best(tmp_path):
    rotation = CheckpointRotation(tmp_path, keep_last=2, keep_best=("reward", "max"))
    ckpt = Checkpoint(state={"step": 0})
    rewards = {1: 5.0, 2: 9.0, 3: 1.0, 4: 2.0}
    for step, reward in rewards.items():
        ckpt.components["state"]["step"] = step
        rotation.save(ckpt, step=step, metadata={"reward": reward})
    names = [p.name for p in rotation.checkpoints()]
    assert names == [
        "checkpoint-000000000002",
        "checkpoint-000000000003",
        "checkpoint-000000000004",
    ]
    assert rotation.best().name.endswith("000000000002")
    target = {}
    assert rotation.load_latest(Checkpoint(state=target)).loaded == {"state"}
    assert target == {"step": 4}
    with pytest.raises(KeyError, match="keep_best reads the metric 'reward'"):
        rotation.save(ckpt, step=5)
    with pytest.raises(ValueError, match="keep_last must be an int >= 1"):
        CheckpointRotation(tmp_path, keep_last=0)


def test_rotation_archive_replaces_a_directory_of_the_same_step(tmp_path):
    rotation = CheckpointRotation(tmp_path, keep_last=3)
    rotation.save(Checkpoint(a={"v": 1}), step=1)
    path = rotation.save(Checkpoint(a={"v": 2}, format="archive"), step=1)
    assert path.name == "checkpoint-000000000001.torchrl"
    assert rotation.checkpoints() == (path,)


def test_dqn_script_training_state_roundtrips_through_an_archive(tmp_path):
    # TorchRL's dqn_cartpole registers the collector (its env state holds pickled bytes),
    # the replay buffer, the loss and the RNG in one archive, and resumes all but config
    from torchrl_lite.collectors import Collector
    from torchrl_lite.envs import GymEnv

    env = GymEnv("CartPole-v1")
    env.set_seed(0)
    collector = Collector(env, None, frames_per_batch=8, total_frames=-1)
    rb = ReplayBuffer(storage=LazyTensorStorage(100))
    rb.extend(collector.next())
    ckpt = Checkpoint(
        format="archive",
        collector=collector,
        replay_buffer=rb,
        rng=GlobalRNGState(),
        config={"a": 1},
    )
    path = ckpt.save(tmp_path / "state.torchrl")
    expected = collector.next()
    stored = rb[:].clone()
    rb.extend(expected)
    result = ckpt.load(path, components={"collector", "replay_buffer", "rng"})
    assert result.unrequested == {"config"}
    torch.testing.assert_close(rb[:], stored)  # the buffer is back to 8 items
    again = collector.next()  # the collector continues from the saved point
    torch.testing.assert_close(again["next", "observation"], expected["next", "observation"])
    collector.shutdown()
