"""TorchRL's utility names that its tutorials and example scripts import."""

import logging
import time

import pytest
import torch

from torchrl_lite import _utils
from torchrl_lite.envs import GymEnv, gym_backend, set_gym_backend


def test_utils_logger_is_an_info_logger_scripts_can_import():
    from torchrl_lite._utils import logger as torchrl_logger

    assert isinstance(torchrl_logger, logging.Logger)
    assert torchrl_logger.isEnabledFor(logging.INFO)
    import torchrl_lite

    assert torchrl_lite.logger is torchrl_logger


def test_timeit_records_mean_and_total_per_name():
    from torchrl_lite._utils import timeit

    timeit._REG.pop("t_block", None)
    for _ in range(3):
        with timeit("t_block"):
            time.sleep(0.002)

    @timeit("t_fn")
    def f(x):
        return x + 1

    assert f(1) == 2
    total = timeit.todict(percall=False)["t_block"]
    mean = timeit.todict(prefix="time")["time/t_block"]
    assert total >= 0.006
    assert mean == pytest.approx(total / 3)
    assert timeit._REG["t_fn"][2] == 1
    assert "t_block took" in timeit.print(prefix="p")
    timeit.erase()
    assert timeit.todict(percall=False)["t_block"] == 0.0


def test_timeit_printevery_prints_num_prints_times(caplog):
    from torchrl_lite._utils import timeit

    timeit._printevery_count = 0
    with timeit("t_every"):
        pass
    printed = []
    original = timeit.print
    timeit.print = classmethod(lambda cls, prefix=None: printed.append(1) or "")
    try:
        for _ in range(100):
            timeit.printevery(num_prints=4, total_count=100)
    finally:
        timeit.print = original
    assert len(printed) == 4


def test_timeit_mark_end_without_start_names_the_mark():
    from torchrl_lite._utils import timeit

    with pytest.raises(KeyError, match="mark_start\\('nope'\\)"):
        timeit.mark_end("nope")


def test_compile_with_warmup_runs_eager_until_the_warmup_ends(monkeypatch):
    from torchrl_lite._utils import compile_with_warmup

    compiled = []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compiled.append(kw) or m)
    layer = torch.nn.Linear(2, 1)
    f = compile_with_warmup(layer, warmup=2, mode="default")
    x = torch.ones(1, 2)
    for _ in range(2):
        assert torch.equal(f(x), layer(x))
    assert compiled == []
    f(x)
    assert compiled == [{"mode": "default"}]
    g = compile_with_warmup(warmup=0)(layer)
    g(x)
    assert len(compiled) == 2


def test_get_available_device_is_the_cpu_here():
    assert _utils.get_available_device() == torch.device("cpu")
    assert _utils.get_available_device(return_str=True) == "cpu"


def test_set_gym_backend_context_decorator_and_set():
    import gymnasium

    with set_gym_backend("gymnasium"):
        assert gym_backend() is gymnasium
    set_gym_backend(gymnasium).set()

    @set_gym_backend("gym")
    def make():
        return GymEnv("CartPole-v1")

    assert make().reset()["observation"].shape == (4,)
    assert gym_backend("spaces") is gymnasium.spaces


def test_set_gym_backend_refuses_other_libraries():
    with pytest.raises(ValueError, match="gymnasium environments only"):
        set_gym_backend("dm_control")


def test_trainers_helpers_tables_scripts_index_by_config_name():
    from torch import nn

    from torchrl_lite.trainers.helpers.envs import LIBS
    from torchrl_lite.trainers.helpers.models import ACTIVATIONS

    assert ACTIVATIONS["relu"] is nn.ReLU and ACTIVATIONS["tanh"] is nn.Tanh
    assert ACTIVATIONS["elu"] is nn.ELU
    env = LIBS["gym"]("Pendulum-v1")
    assert isinstance(env, GymEnv) and env.reset()["observation"].shape == (3,)
