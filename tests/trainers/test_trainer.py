"""Trainer: hook order, register_op, logging cadence (host syncs), progress bar, seeding."""

from __future__ import annotations

import sys

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from tests.trainers.setups import FPB, dqn_run, ppo_run
from torchrl_lite.trainers import Trainer, TrainerHookBase
from torchrl_lite.trainers.trainers import DESTINATIONS


class TinyLoss(nn.Module):
    """``loss_mse`` of a linear model on ``obs`` -> ``y``, plus a detached diagnostic."""

    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 1)

    def forward(self, td):
        err = (self.net(td["obs"]) - td["y"]).pow(2).mean()
        return TensorDict(loss_mse=err, err_detached=err.detach())


def batches(n: int, size: int = 8):
    g = torch.Generator().manual_seed(0)
    return [
        TensorDict(obs=torch.randn(size, 3, generator=g), y=torch.zeros(size, 1), batch_size=[size])
        for _ in range(n)
    ]


def tiny_trainer(n_batches=2, optim_steps=2, **kwargs) -> Trainer:
    loss = TinyLoss()
    kwargs.setdefault("progress_bar", False)
    return Trainer(
        collector=batches(n_batches),
        total_frames=8 * n_batches,
        optim_steps_per_batch=optim_steps,
        loss_module=loss,
        optimizer=torch.optim.SGD(loss.parameters(), lr=0.1),
        **kwargs,
    )


class FakeLogger:
    def __init__(self):
        self.calls = []

    def log_scalar(self, name, value, step=None):
        self.calls.append((name, value, step))


def test_trainer_hook_order():
    trainer = tiny_trainer(n_batches=2, optim_steps=2)
    seen = []

    def make(dest):
        def op(*args, **kwargs):
            seen.append(dest)

        return op

    for dest in DESTINATIONS:
        if dest != "optimizer":
            trainer.register_op(dest, make(dest))
    trainer.register_op("optimizer", make("optimizer"))  # after the built-in OptimizerHook
    trainer.train()
    optim_step = ["process_optim_batch", "post_loss", "optimizer", "post_optim", "post_optim_log"]
    one_batch = [
        "batch_process",
        "pre_steps_log",
        "pre_optim_steps",
        *optim_step,
        *optim_step,
        "post_steps",
        "post_steps_log",
    ]
    assert seen == one_batch * 2
    assert trainer.optim_count == 4 and trainer.collected_frames == 16


def test_trainer_register_op_bad_name():
    trainer = tiny_trainer()
    with pytest.raises(ValueError, match="unknown destination 'post_los'") as info:
        trainer.register_op("post_los", lambda batch: None)
    for dest in DESTINATIONS:
        assert dest in str(info.value)
    with pytest.raises(TypeError, match="callable"):
        trainer.register_op("post_loss", 3)


def test_trainer_register_module_duplicate_name():
    trainer = tiny_trainer()
    with pytest.raises(ValueError, match="'optimizer' is already registered"):
        trainer.register_module("optimizer", object())


def test_trainer_hook_object_register_and_kwargs():
    class Counter(TrainerHookBase):
        def __init__(self):
            self.n = 0

        def __call__(self, step=1):
            self.n += step

        def state_dict(self):
            return {"n": self.n}

        def register(self, trainer, name="counter"):
            trainer.register_op("post_steps", self, step=5)
            trainer.register_module(name, self)

    trainer = tiny_trainer(n_batches=3)
    hook = Counter()
    hook.register(trainer)
    trainer.train()
    assert hook.n == 15
    assert trainer.state_dict()["hooks"]["counter"] == {"n": 15}


def test_trainer_batch_and_optim_batch_hooks_chain():
    trainer = tiny_trainer(n_batches=1, optim_steps=1)
    trainer.register_op("batch_process", lambda b: b.set("y", torch.ones(8, 1)))
    trainer.register_op("process_optim_batch", lambda b: b[:4])
    seen = []
    trainer.register_op("post_loss", lambda b: seen.append((b.shape, b["y"].mean().item())))
    trainer.train()
    assert seen == [(torch.Size([4]), 1.0)]


def test_trainer_clip_grad_norm_logs_grad_norm():
    logger = FakeLogger()
    trainer = tiny_trainer(n_batches=2, clip_norm=1e-3, logger=logger, log_interval=8)
    before = trainer.loss_module.net.weight.detach().clone()
    trainer.train()
    names = {name for name, _, _ in logger.calls}
    assert {"loss_mse", "err_detached", "grad_norm_0"} <= names
    # 4 steps of lr 0.1 on gradients clipped to norm 1e-3 move the weights by <= 4e-4
    moved = (trainer.loss_module.net.weight - before).norm().item()
    assert 0 < moved <= 4e-4 + 1e-7


def test_trainer_clip_grad_value():
    trainer = tiny_trainer(n_batches=1, optim_steps=1, clip_grad_norm=False, clip_norm=1e-4)
    before = trainer.loss_module.net.weight.detach().clone()
    trainer.train()
    assert (trainer.loss_module.net.weight - before).abs().max().item() <= 1.01e-5


def test_trainer_bad_arguments():
    with pytest.raises(ValueError, match="total_frames"):
        tiny_trainer(n_batches=0)
    with pytest.raises(TypeError, match="iterable"):
        Trainer(collector=3, total_frames=8, optim_steps_per_batch=1, loss_module=TinyLoss())
    with pytest.raises(TypeError, match="log_scalar"):
        tiny_trainer(logger=object())


def test_trainer_skips_optim_during_init_random_frames():
    class Collector(list):
        init_random_frames = 16

    loss = TinyLoss()
    trainer = Trainer(
        collector=Collector(batches(4)),
        total_frames=32,
        optim_steps_per_batch=1,
        loss_module=loss,
        optimizer=torch.optim.SGD(loss.parameters(), lr=0.1),
        progress_bar=False,
    )
    trainer.train()
    assert trainer.optim_count == 2  # frames 24 and 32 exceed 16


class _SyncCounter:
    """Counts host syncs (item/tolist/float/int/bool of a tensor) made by trainer code."""

    METHODS = ("item", "tolist", "__float__", "__int__", "__bool__")

    def __init__(self, monkeypatch):
        self.count = 0
        for name in self.METHODS:
            original = getattr(torch.Tensor, name)
            monkeypatch.setattr(torch.Tensor, name, self._wrap(original))

    def _wrap(self, original):
        def wrapper(tensor, *args, **kwargs):
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if caller.startswith("torchrl_lite.trainers"):
                self.count += 1
            return original(tensor, *args, **kwargs)

        return wrapper


@pytest.mark.parametrize("log_every", [1, 3])
def test_trainer_reads_logged_values_once_per_log_interval(monkeypatch, log_every):
    """Losses and logged values stay tensors; one host sync per log interval."""
    logger = FakeLogger()
    run = ppo_run(6, logger=logger, log_interval=log_every * FPB)
    from torchrl_lite.trainers import LogReward

    LogReward().register(run.trainer)
    syncs = _SyncCounter(monkeypatch)
    run.trainer.train()
    logs = 6 // log_every
    assert syncs.count == logs
    steps = sorted({step for _, _, step in logger.calls})
    assert steps == [FPB * log_every * (i + 1) for i in range(logs)]
    assert all(type(value) is float for _, value, _ in logger.calls)
    names = {name for name, _, _ in logger.calls}
    assert {"loss_objective", "loss_critic", "loss_entropy", "r_training"} <= names


def test_trainer_logs_means_since_last_log():
    logger = FakeLogger()
    trainer = tiny_trainer(n_batches=4, optim_steps=1, logger=logger, log_interval=16)
    values = []
    trainer.register_op("pre_steps_log", lambda b: {"v": torch.tensor(float(len(values)))})
    trainer.register_op("pre_steps_log", lambda b: values.append(1))
    trainer.register_op("post_steps_log", lambda b: {"nan": torch.tensor(float("nan"))})
    trainer.train()
    logged = [(value, step) for name, value, step in logger.calls if name == "v"]
    assert logged == [(0.5, 16), (2.5, 32)]
    assert not [c for c in logger.calls if c[0] == "nan"]  # NaN only: nothing logged


def test_trainer_progress_bar_shows_frames_reward_and_losses(capsys):
    run = dqn_run(4, progress_bar=True, log_interval=FPB)
    run.trainer.train()
    err = capsys.readouterr().err
    assert f"{4 * FPB}/{4 * FPB}" in err and "frames" in err
    assert "loss=" in err and "r_training=" in err


def test_trainer_same_seed_same_losses():
    first = dqn_run(3, seed=1)
    first.trainer.train()
    second = dqn_run(3, seed=1)
    second.trainer.train()
    assert len(first.losses) == len(second.losses) == 6
    for a, b in zip(first.losses, second.losses):
        assert torch.equal(a["loss"], b["loss"])


def test_trainer_seed_argument_seeds_collector_and_torch():
    runs = []
    for _ in range(2):
        run = ppo_run(2, seed=0)
        torch.manual_seed(len(runs))  # a different global state before each run
        run.trainer.set_seed(7)
        run.trainer.train()
        runs.append(run)
    for a, b in zip(runs[0].losses, runs[1].losses):
        assert torch.equal(a["loss_objective"], b["loss_objective"])


def test_trainer_with_csv_logger(tmp_path):
    from torchrl_lite.record import CSVLogger

    logger = CSVLogger("run", log_dir=str(tmp_path))
    run = dqn_run(4, logger=logger, log_interval=2 * FPB)
    run.trainer.train()
    logger.close()
    rows = (tmp_path / "run" / "metrics.csv").read_text().strip().splitlines()
    header = rows[0].split(",")
    assert header[0] == "step" and {"loss", "r_training"} <= set(header)
    assert [row.split(",")[0] for row in rows[1:]] == [str(2 * FPB), str(4 * FPB)]


def test_trainer_train_after_total_frames_does_nothing():
    trainer = tiny_trainer(n_batches=2)
    trainer.train()
    frames, steps = trainer.collected_frames, trainer.optim_count
    trainer.train()
    assert (trainer.collected_frames, trainer.optim_count) == (frames, steps)
