"""Shared test set-up (tests and doctests): headless rendering, one torch thread,
optional-dependency skips, names every doctest may use."""

import importlib.util
import os
import signal

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("PYOPENGL_PLATFORM", os.environ["MUJOCO_GL"])
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("TORCHRL_LITE_SMOKE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1)

_OPTIONAL = {"dm_control": "dm_control", "ray": "ray"}


def pytest_collection_modifyitems(config, items):
    for marker, module in _OPTIONAL.items():
        if importlib.util.find_spec(module) is None:
            skip = pytest.mark.skip(
                reason=f"{module} is not installed (pip install 'torchrl-lite[{marker}]')"
            )
            for item in items:
                if marker in item.keywords:
                    item.add_marker(skip)
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="no CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    from tensordict import TensorDict

    doctest_namespace.update(torch=torch, nn=torch.nn, TensorDict=TensorDict)


@pytest.fixture
def sigint_raises():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt during the test, even when the test run was
    started with SIGINT ignored (as a background job of a non-interactive shell is)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


collect_ignore = ["torchrl_lite/__main__.py", "benchmarks"]
