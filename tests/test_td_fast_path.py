"""The fast-path layer (torchrl_lite/_td.py): the only user of tensordict's internals.

Checks that its functions give what the public API gives, on plain, locked, nested and
lazily stacked TensorDicts, in both modes; that no other module uses the internals; and
that the core env, collector and buffer tests pass through the public-API fallback.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from torchrl_lite import _td

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "torchrl_lite"

# what counts as tensordict's private API: private attributes of TensorDicts and private
# names imported from tensordict's modules
_INTERNALS = re.compile(
    r"\._tensordict\b|\._(?:set|get)_(?:str|tuple|at_str|at_tuple)\b|\._new_unsafe\b"
    r"|\._is_locked\b|\._module_iter\b|\._generator(?:_key)?\b|\._td_dim_names\b|\._erase_names\b|\._maybe_names\b"
    r"|from tensordict[\w.]* import [^\n]*\b_[a-z]\w*|from tensordict(?:\.\w+)*\._\w+"
)


@pytest.fixture(params=["fast", "fallback"])
def td_layer(request, monkeypatch):
    """The ``_td`` module in each mode (reloaded with TORCHRL_LITE_TD_FAST set)."""
    monkeypatch.setenv("TORCHRL_LITE_TD_FAST", "1" if request.param == "fast" else "0")
    module = importlib.reload(_td)
    yield module
    monkeypatch.delenv("TORCHRL_LITE_TD_FAST")
    importlib.reload(_td)


def test_fast_path_is_on_with_the_pinned_tensordict():
    assert _td.FAST, "the internals check failed on the tensordict this project pins"


def test_modes_follow_the_environment_variable(td_layer):
    assert td_layer.FAST == (os.environ["TORCHRL_LITE_TD_FAST"] == "1")
    if not td_layer.FAST:
        assert td_layer.store(TensorDict()) is None and td_layer.entries(TensorDict()) is None


def _sample() -> TensorDict:
    return TensorDict(
        {"obs": torch.arange(6.0).reshape(3, 2), "next": {"reward": torch.ones(3, 1)}}, [3]
    )


def test_get_and_set_match_the_public_api(td_layer):
    td = _sample()
    assert td_layer.get(td, "obs") is td.get("obs")
    assert td_layer.get(td, "missing") is None
    assert td_layer.get(td, "missing", 7) == 7
    assert td_layer.get_path(td, ("next", "reward")) is td.get(("next", "reward"))
    assert td_layer.get_path(td, ("next", "missing")) is None
    value = torch.zeros(3, 4)
    td_layer.set(td, "new", value)
    assert td.get("new") is value
    td_layer.set_checked(td, "checked", torch.zeros(3))
    assert td.get("checked").shape == (3,)
    with pytest.raises(RuntimeError, match="batch dimension mismatch|batch size"):
        td_layer.set_checked(td, "bad", torch.zeros(4))


def test_new_builds_the_same_tensordict(td_layer):
    obs = torch.zeros(2, 3)
    nested = TensorDict({"r": torch.ones(2, 1)}, [2])
    td = td_layer.new({"obs": obs, "next": nested}, torch.Size([2]), None)
    assert type(td) is TensorDict and td.batch_size == (2,) and td.device is None
    assert td.get("obs") is obs and td.get(("next", "r")) is nested.get("r")
    assert (td == TensorDict({"obs": obs, "next": nested}, [2])).all()


def test_store_and_entries(td_layer):
    td = _sample()
    if td_layer.FAST:
        assert td_layer.entries(td) is td_layer.store(td)
        assert set(td_layer.entries(td)) == {"obs", "next"}
    locked = _sample().lock_()
    assert td_layer.store(locked) is None  # writes go through set(), which raises
    lazy = LazyStackedTensorDict.lazy_stack([_sample(), _sample()])
    assert td_layer.store(lazy) is None and td_layer.entries(lazy) is None
    assert td_layer.get(lazy, "obs").shape == (2, 3, 2)


def test_same_layout(td_layer):
    a, b = _sample(), _sample()
    assert td_layer.same_layout(a, b) == td_layer.FAST
    assert not td_layer.same_layout(a, TensorDict({}, [2]))
    assert not td_layer.same_layout(a, LazyStackedTensorDict.lazy_stack([b, b]))


def test_no_module_outside_the_layer_uses_tensordict_internals():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_td.py" and path.parent == PACKAGE:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if _INTERNALS.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "tensordict internals outside torchrl_lite/_td.py:\n" + "\n".join(
        offenders
    )


def test_the_grep_catches_internals():
    for line in (
        "x = td._tensordict",
        "td._set_str(k, v, validated=True, inplace=False)",
        "TensorDict._new_unsafe(d, batch_size=[])",
        "from tensordict.nn.utils import _set_skip_existing_None",
        "from tensordict._td import TensorDict",
    ):
        assert _INTERNALS.search(line), line
    assert not _INTERNALS.search("from tensordict import TensorDict, TensorDictBase")


# the core behaviour tests, run again through the public-API fallback
_CORE_TESTS = [
    "tests/envs/test_gym.py",
    "tests/envs/test_pendulum.py",
    "tests/envs/test_batched_envs.py",
    "tests/envs/test_transforms.py",
    "tests/collectors/test_sync.py",
    "tests/collectors/test_fast_batch.py",
    "tests/envs/test_fast_rollout.py",
    "tests/data/test_replay_buffers.py",
]


def test_core_tests_pass_through_the_fallback():
    env = dict(os.environ, TORCHRL_LITE_TD_FAST="0")
    check = subprocess.run(
        [sys.executable, "-c", "import torchrl_lite._td as t; print(t.FAST)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.strip() == "False"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-m", "not slow", "-p", "no:cacheprovider"]
        + _CORE_TESTS,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout
