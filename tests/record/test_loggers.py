"""Loggers: what is logged is what is read back (CSV files, TensorBoard events, videos)."""

import csv
import dataclasses
import json
import subprocess
import sys
import types

import imageio.v3 as iio
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.record import (
    CSVLogger,
    TensorboardLogger,
    WandbLogger,
    generate_exp_name,
    get_logger,
)
from torchrl_lite.record.loggers.common import as_video, make_grid, video_to_frames


def _read_rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _video(t=6, c=3, h=16, w=20, n=None):
    """Distinct random frames (identical consecutive frames may be merged by GIF writers)."""
    g = torch.Generator().manual_seed(0)
    shape = (t, c, h, w) if n is None else (n, t, c, h, w)
    return torch.randint(0, 256, shape, generator=g, dtype=torch.uint8)


# -- CSVLogger ----------------------------------------------------------------------------
def test_csv_logger_scalars_read_back(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    values = [0.5, torch.tensor(1.25), torch.tensor([2.0]), 3, -1e-8]
    for step, value in zip([0, 10, 20, 30, 40], values):
        logger.log_scalar("reward", value, step=step)
    logger.close()
    rows = _read_rows(tmp_path / "exp" / "scalars" / "reward.csv")
    assert [(int(s), float(v)) for s, v in rows] == [
        (0, 0.5),
        (10, 1.25),
        (20, 2.0),
        (30, 3.0),
        (40, -1e-8),
    ]


def test_csv_logger_default_steps_count_per_name(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        for i in range(3):
            logger.log_scalar("a", float(i))
        logger.log_scalar("b", 7.0)
        logger.log_scalar("a", 9.0, step=10)
        logger.log_scalar("a", 11.0)
    rows = _read_rows(tmp_path / "exp" / "scalars" / "a.csv")
    assert [int(s) for s, _ in rows] == [0, 1, 2, 10, 11]
    assert _read_rows(tmp_path / "exp" / "scalars" / "b.csv") == [["0", "7.0"]]


def test_csv_logger_metrics_table_one_row_per_step(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    path = tmp_path / "exp" / "metrics.csv"
    logger.log_scalar("loss", 1.0, step=0)
    logger.log_scalar("reward", -5.0, step=0)  # new column: rewrite
    assert _read_rows(path) == [["step", "loss", "reward"], ["0", "1.0", "-5.0"]]
    logger.log_scalar("loss", 0.5, step=100)
    assert _read_rows(path)[-1] == ["100", "0.5", ""]  # complete on disk before the step ends
    logger.log_scalar("reward", -4.0, step=100)  # same step: last row rewritten in place
    logger.log_scalar("lr", 0.1, step=100)  # new column mid-row
    logger.log_scalar("loss", 0.25, step=200)
    logger.close()
    assert _read_rows(path) == [
        ["step", "loss", "reward", "lr"],
        ["0", "1.0", "-5.0", ""],
        ["100", "0.5", "-4.0", "0.1"],
        ["200", "0.25", "", ""],
    ]


def test_csv_logger_nested_name_makes_subfolder(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_scalar("train/reward", 1.0, step=3)
    assert _read_rows(tmp_path / "exp" / "scalars" / "train" / "reward.csv") == [["3", "1.0"]]
    assert _read_rows(tmp_path / "exp" / "metrics.csv")[0] == ["step", "train/reward"]


def test_csv_logger_hparams_json_merges(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Config:
        lr: float = 3e-4
        env: str = "Pendulum-v1"
        hidden: tuple = (64, 64)

    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_hparams(Config())
        logger.log_hparams({"seed": 1, "device": torch.device("cpu")})
        with pytest.raises(TypeError, match="dict or a dataclass"):
            logger.log_hparams([("lr", 1)])
    saved = json.loads((tmp_path / "exp" / "hparams.json").read_text())
    assert saved == {
        "lr": 3e-4,
        "env": "Pendulum-v1",
        "hidden": [64, 64],
        "seed": 1,
        "device": "cpu",
    }


@pytest.mark.parametrize("video_format", ["pt", "mp4", "gif"])
def test_csv_logger_video_has_all_frames(tmp_path, video_format):
    video = _video(t=7)
    with CSVLogger("exp", log_dir=tmp_path, video_format=video_format, video_fps=10) as logger:
        logger.log_video("rollout", video)
        logger.log_video("rollout", video[:3], step=50)
    folder = tmp_path / "exp" / "videos"
    assert sorted(p.name for p in folder.iterdir()) == [
        f"rollout_0.{video_format}",
        f"rollout_50.{video_format}",
    ]
    first = folder / f"rollout_0.{video_format}"
    if video_format == "pt":
        assert torch.equal(torch.load(first), video.unsqueeze(0))
    else:
        frames = iio.imread(first, index=None)
        assert frames.shape == (7, 16, 20, 3)
        assert iio.imread(folder / f"rollout_50.{video_format}", index=None).shape[0] == 3


def test_csv_logger_mp4_odd_size_padded_not_rescaled(tmp_path):
    video = _video(t=4, h=9, w=11)
    with CSVLogger("exp", log_dir=tmp_path, video_format="mp4") as logger:
        logger.log_video("odd", video.permute(0, 2, 3, 1))  # channels last
    frames = iio.imread(tmp_path / "exp" / "videos" / "odd_0.mp4", index=None)
    assert frames.shape == (4, 10, 12, 3)


def test_csv_logger_several_videos_tiled(tmp_path):
    video = _video(n=4, t=5, h=8, w=8)
    with CSVLogger("exp", log_dir=tmp_path, video_format="gif") as logger:
        logger.log_video("grid", video)
    frames = iio.imread(tmp_path / "exp" / "videos" / "grid_0.gif", index=None)
    assert frames.shape == (5, 16, 16, 3)


def test_csv_logger_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="video_format"):
        CSVLogger("exp", log_dir=tmp_path, video_format="avi")
    with pytest.raises(ValueError, match="video_fps"):
        CSVLogger("exp", log_dir=tmp_path, video_fps=0)
    with pytest.raises(ValueError, match="exp_name"):
        CSVLogger("", log_dir=tmp_path)


def test_logger_rejects_bad_values(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        with pytest.raises(TypeError, match="'loss'.*shape \\[3\\]"):
            logger.log_scalar("loss", torch.ones(3))
        with pytest.raises(TypeError, match="step must be an integer"):
            logger.log_scalar("loss", 1.0, step=1.5)
        with pytest.raises(ValueError, match="\\[T, C, H, W\\]"):
            logger.log_video("v", torch.zeros(8, 8, 3, dtype=torch.uint8))
        with pytest.raises(ValueError, match="colour channel"):
            logger.log_video("v", torch.zeros(2, 5, 8, 8, dtype=torch.uint8))
        with pytest.raises(ValueError, match="\\[0, 1\\]"):
            logger.log_video("v", torch.full((2, 3, 8, 8), 2.0))
        with pytest.raises(TypeError, match="uint8 or float"):
            logger.log_video("v", torch.zeros(2, 3, 8, 8, dtype=torch.int32))
        with pytest.raises(NotImplementedError, match="histograms"):
            logger.log_histogram("h", torch.randn(10))
    assert not (tmp_path / "exp" / "scalars" / "loss.csv").exists()


def test_logger_closed_raises(tmp_path):
    logger = CSVLogger("exp", log_dir=tmp_path)
    logger.close()
    logger.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        logger.log_scalar("x", 1.0)


def test_log_metrics_tensordict_one_name_per_leaf(tmp_path):
    metrics = TensorDict(
        {"loss_actor": torch.tensor(0.5), "train": {"reward": torch.tensor(-3.0)}}, []
    )
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_metrics(metrics, step=7)
        logger.log_metrics({"lr": 0.01, "frames": torch.tensor(100)}, step=7)
    rows = _read_rows(tmp_path / "exp" / "metrics.csv")
    assert rows[0] == ["step", "loss_actor", "train/reward", "lr", "frames"]
    assert rows[1] == ["7", "0.5", "-3.0", "0.01", "100.0"]


def test_log_metrics_bad_value_logs_nothing(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        with pytest.raises(TypeError, match="'bad'"):
            logger.log_metrics({"good": torch.tensor(1.0), "bad": torch.ones(2)}, step=0)
    assert _read_rows(tmp_path / "exp" / "metrics.csv") == [["step"]]


def test_csv_logger_continues_existing_experiment(tmp_path):
    with CSVLogger("exp", log_dir=tmp_path) as logger:
        logger.log_hparams({"lr": 0.1})
        logger.log_scalar("reward", 1.0, step=0)
        logger.log_scalar("loss", 2.0, step=0)
    with CSVLogger("exp", log_dir=tmp_path) as logger:  # a resumed run
        logger.log_hparams({"seed": 3})
        logger.log_scalar("reward", 1.5, step=10)
    exp = tmp_path / "exp"
    assert _read_rows(exp / "scalars" / "reward.csv") == [["0", "1.0"], ["10", "1.5"]]
    assert _read_rows(exp / "metrics.csv") == [
        ["step", "reward", "loss"],
        ["0", "1.0", "2.0"],
        ["10", "1.5", ""],
    ]
    assert json.loads((exp / "hparams.json").read_text()) == {"lr": 0.1, "seed": 3}
    (exp / "metrics.csv").write_text("time,reward\n1,2\n")
    with pytest.raises(ValueError, match="not a metrics table"):
        CSVLogger("exp", log_dir=tmp_path)


# -- video helpers ------------------------------------------------------------------------
def test_as_video_layouts_and_float():
    chw = _video(t=3, h=6, w=7)
    assert torch.equal(as_video(chw.permute(0, 2, 3, 1)), chw.unsqueeze(0))
    assert torch.equal(as_video(chw.float() / 255), chw.unsqueeze(0))
    assert as_video(chw.numpy()).shape == (1, 3, 3, 6, 7)


def test_make_grid_tiles_row_by_row():
    frames = torch.arange(3).view(3, 1, 1, 1).expand(3, 1, 2, 2)
    grid = make_grid(frames)
    assert grid.shape == (1, 4, 4)
    assert grid[0, ::2, ::2].tolist() == [[0, 1], [2, 0]]  # the 4th cell is black
    assert video_to_frames(frames.unsqueeze(1).to(torch.uint8)).shape == (1, 4, 4, 3)


# -- TensorboardLogger --------------------------------------------------------------------
def test_tensorboard_logger_events_readable(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logger = TensorboardLogger("run", log_dir=tmp_path, video_fps=5)
    for step, value in enumerate([1.0, torch.tensor(2.5), -3.0]):
        logger.log_scalar("train/reward", value, step=step * 10)
    logger.log_hparams({"lr": 3e-4, "optim": {"name": "adam", "eps": 1e-8}, "layers": [64, 64]})
    logger.log_histogram("weights", torch.randn(100), step=1)
    logger.log_video("rollout", _video(t=4, h=8, w=8), step=2)
    logger.close()

    events = EventAccumulator(str(tmp_path / "run"), size_guidance={"images": 0})
    events.Reload()
    scalars = events.Scalars("train/reward")
    assert [(e.step, e.value) for e in scalars] == [(0, 1.0), (10, 2.5), (20, -3.0)]
    assert "weights" in events.Tags()["histograms"]
    assert "hparams/text_summary" in events.Tags()["tensors"]
    assert "_hparams_/experiment" in events.PluginTagToContent("hparams")
    (image,) = events.Images("rollout")
    assert image.step == 2 and (image.height, image.width) == (8, 8)
    gif = iio.imread(image.encoded_image_string, index=None, extension=".gif")
    assert gif.shape == (4, 8, 8, 3)


# -- WandbLogger --------------------------------------------------------------------------
def test_wandb_logger_missing_dependency_names_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    with pytest.raises(ImportError, match="pip install wandb"):
        WandbLogger("exp", offline=True, save_dir=str(tmp_path))
    with pytest.raises(ImportError, match="pip install wandb"):
        get_logger("wandb", str(tmp_path), "exp")


def test_wandb_logger_calls_wandb(monkeypatch, tmp_path):
    calls = []

    class Run:
        config = types.SimpleNamespace(update=lambda cfg, **kw: calls.append(("config", cfg)))

        def log(self, data):
            calls.append(("log", data))

        def finish(self):
            calls.append(("finish",))

    fake = types.ModuleType("wandb")
    fake.init = lambda **kwargs: calls.append(("init", kwargs)) or Run()
    fake.Video = lambda frames, fps, **kw: ("video", frames.shape, fps)
    fake.Histogram = lambda data, num_bins: ("histogram", num_bins)
    monkeypatch.setitem(sys.modules, "wandb", fake)

    logger = get_logger("wandb", str(tmp_path), "exp", wandb_kwargs={"project": "p"}, offline=True)
    logger.log_scalar("reward", torch.tensor(1.5), step=4)
    logger.log_hparams({"lr": 0.1})
    logger.log_video("v", _video(t=2, h=4, w=4), fps=7)
    logger.log_histogram("h", torch.randn(5))
    logger.close()
    assert calls[0] == (
        "init",
        {"name": "exp", "project": "p", "dir": str(tmp_path), "mode": "offline"},
    )
    assert calls[1:] == [
        ("log", {"reward": 1.5, "trainer/step": 4}),
        ("config", {"lr": 0.1}),
        ("log", {"v": ("video", (2, 3, 4, 4), 7), "trainer/step": 0}),
        ("log", {"h": ("histogram", 64), "trainer/step": 0}),
        ("finish",),
    ]


# -- get_logger / generate_exp_name -------------------------------------------------------
def test_get_logger_types(tmp_path):
    csv_logger = get_logger("csv", str(tmp_path), "a", video_format="gif")
    assert isinstance(csv_logger, CSVLogger) and csv_logger.video_format == "gif"
    assert (tmp_path / "a" / "scalars").is_dir()
    csv_logger.close()
    tb_logger = get_logger("tensorboard", str(tmp_path), "b")
    assert isinstance(tb_logger, TensorboardLogger)
    tb_logger.close()
    assert get_logger(None, str(tmp_path), "c") is None


def test_get_logger_unknown_type_lists_valid(tmp_path):
    with pytest.raises(ValueError, match="'mlflow'.*'csv', 'tensorboard', 'wandb'"):
        get_logger("mlflow", str(tmp_path), "exp")


def test_generate_exp_name_unique():
    a, b = generate_exp_name("SAC", "Pendulum-v1"), generate_exp_name("SAC", "Pendulum-v1")
    assert a.startswith("SAC_Pendulum-v1_") and a != b


# -- import cost --------------------------------------------------------------------------
def test_import_record_is_lazy():
    code = (
        "import sys, torchrl_lite.record\n"
        "heavy = ['tensorboard', 'torch.utils.tensorboard', 'wandb', 'imageio', 'matplotlib', 'PIL']\n"
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
