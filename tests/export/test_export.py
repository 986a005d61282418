"""Export of trained runs: each format reloaded by its own runtime against the eager policy."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from torchrl_lite._run_folder.trained import trained_policy as _trained_policy
from torchrl_lite.cli import main
from torchrl_lite.envs import (
    ExplorationType,
    StepCounter,
    TransformedEnv,
    VecNorm,
    set_exploration_type,
)
from torchrl_lite.export import (
    ExportError,
    export_policy,
    exportable_policy,
    load_runtime,
    play_exported,
)
from torchrl_lite.recipes.common import make_env

pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

FORMATS = ["onnx", "pt2", "torchscript"]
RUNS = {  # a few hundred frames each: enough to move the weights off their init
    "ppo": ["ppo", "--frames", "256", "frames_per_batch=128", "mini_batch_size=64",
            "epochs=1", "num_envs=1"],
    "sac": ["sac", "--frames", "150", "init_random_frames=100", "batch_size=32"],
    "dqn": ["dqn", "--frames", "256", "init_random_frames=64", "frames_per_batch=64",
            "optim_steps_per_batch=2", "num_envs=1", "batch_size=32"],
    "pixels": ["ppo", "--frames", "64", "pixels=true", "frames_per_batch=32",
               "mini_batch_size=32", "epochs=1", "num_envs=1"],
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> a run folder trained by ``torchrl-lite train`` (built on first use)."""
    root, made = tmp_path_factory.mktemp("runs"), {}

    def get(name):
        if name not in made:
            out = root / name
            args = ["train", *RUNS[name][:1], "--out", str(out), "--quiet", "--logger", "none"]
            assert main([*args, *RUNS[name][1:]]) == 0
            made[name] = out
        return made[name]

    return get


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", ["ppo", "sac", "dqn", "pixels"])
def test_export_parity_in_each_format(runs, name, fmt, tmp_path):
    recipe, cfg, policy = _trained_policy(str(runs(name)))
    path = tmp_path / f"policy.{fmt}"
    steps = 8 if name == "pixels" else 60
    info = export_policy(
        recipe.make_eval_env(cfg), policy, path, fmt, episodes=1, max_steps=steps,
        meta={"algo": recipe.ALGO},
    )  # fmt: skip
    assert path.is_file()
    assert 0 <= info["parity"]["max_abs_diff"] <= 1e-5
    assert info["parity"]["steps"] == steps or name == "dqn"  # CartPole may end sooner
    saved = json.loads((tmp_path / f"policy.{fmt}.json").read_text())
    assert saved["inputs"] == info["inputs"] and saved["format"] == fmt
    if name == "pixels":  # raw frames in, the frame stack carried as explicit state
        names = [i["name"] for i in info["inputs"]]
        assert names == ["pixels", "is_init", "pixels_stack"]
        assert info["inputs"][0]["dtype"] == "uint8" and info["inputs"][0]["shape"][-1] == 3
        assert info["outputs"][1]["name"] == "next_pixels_stack"


@pytest.mark.parametrize("name", ["ppo", "sac", "dqn"])
def test_exported_file_matches_eager_policy_on_raw_gymnasium(runs, name, tmp_path):
    """The file, fed the observations of a plain gymnasium env, acts as the eager policy."""
    recipe, cfg, policy = _trained_policy(str(runs(name)))
    path = tmp_path / "policy.onnx"
    export_policy(recipe.make_eval_env(cfg), policy, path, "onnx", episodes=1, max_steps=5)
    runtime = load_runtime(path)
    env = gym.make(cfg.env)
    obs, _ = env.reset(seed=3)
    batch = np.stack([env.observation_space.sample() for _ in range(7)] + [obs])
    batch = batch.astype(np.float32)  # [8, obs]
    (action,) = runtime([batch], ["observation"])
    with set_exploration_type(ExplorationType.DETERMINISTIC), torch.no_grad():
        eager = policy(TensorDict(observation=torch.as_tensor(batch), batch_size=[8]))["action"]
    if name == "dqn":  # the index gymnasium's Discrete space takes
        assert action.dtype == np.int64 and action.shape == (8,)
        np.testing.assert_array_equal(action, eager.argmax(-1).numpy())
        env.step(int(action[-1]))
    else:
        np.testing.assert_allclose(action, eager.numpy(), atol=1e-5)
        assert np.all(np.abs(action) <= 2.0)  # Pendulum's torque bounds, squash baked in
        env.step(action[-1])


def test_parity_check_catches_a_broken_baked_transform(runs, tmp_path):
    """A resize that differs from the env's (nearest instead of area) fails the export."""
    recipe, cfg, policy = _trained_policy(str(runs("pixels")))
    env = recipe.make_eval_env(cfg)
    module = exportable_policy(env, policy)
    resize = next(t for t in module.steps if type(t).__name__ == "Resize")
    resize.interpolation = "nearest"
    path = tmp_path / "policy.pt2"
    with pytest.raises(ExportError, match=r"Parity check failed: the pt2 file's actions differ"):
        export_policy(env, policy, path, "pt2", episodes=1, max_steps=4, module=module)
    assert not path.exists()


def _linear_policy(in_key="observation", width=3):
    torch.manual_seed(0)
    return TensorDictModule(nn.Linear(width, 1), [in_key], ["action"])


def test_export_refuses_an_updating_vecnorm_and_accepts_a_frozen_one(tmp_path):
    env = TransformedEnv(make_env("Pendulum-v1", seed=0), VecNorm(in_keys=["observation"]))
    with pytest.raises(ExportError, match=r"VecNorm is still updating"):
        exportable_policy(env, _linear_policy())
    env.rollout(20)  # statistics to freeze
    env.transform[-1].freeze()
    info = export_policy(env, _linear_policy(), tmp_path / "p.pt2", "pt2", max_steps=20)
    assert info["parity"]["max_abs_diff"] <= 1e-5


def test_export_names_a_stateful_transform_the_policy_reads():
    env = TransformedEnv(make_env("Pendulum-v1"), StepCounter())
    policy = TensorDictModule(nn.Linear(1, 1), ["step_count"], ["action"])
    with pytest.raises(ExportError, match=r"reads 'step_count', written by StepCounter"):
        exportable_policy(env, policy)


def test_export_refuses_a_policy_with_hidden_recurrent_state():
    class Carrying(TensorDictModule):
        _carry = None

    policy = Carrying(nn.Linear(3, 1), ["observation"], ["action"])
    with pytest.raises(ExportError, match=r"Cannot export Carrying: it keeps its recurrent"):
        exportable_policy(make_env("Pendulum-v1"), policy)


def test_cli_export_and_eval_exported(runs, tmp_path, capsys):
    run = runs("ppo")
    out = tmp_path / "ppo.onnx"
    assert main(["export", str(run), "--format", "onnx", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "max |action difference|" in printed and str(out) in printed
    assert json.loads((tmp_path / "ppo.onnx.json").read_text())["algo"] == "ppo"
    assert main(["eval", "--exported", str(out), "--env", "Pendulum-v1", "--episodes", "2"]) == 0
    assert "over 2 episodes (exported policy" in capsys.readouterr().out
    mean, _ = play_exported(out, episodes=1, max_steps=200)
    assert -2000 < mean <= 0  # Pendulum's returns


@pytest.mark.parametrize(
    "argv, message",
    [
        (["eval"], "eval needs a run folder, or --exported FILE"),
        (["eval", "RUN", "--exported", "X.onnx"], "give the run folder RUN or --exported"),
        (["eval", "--exported", "missing.onnx"], "--exported missing.onnx: no such file"),
        (["eval", "RUN", "--env", "CartPole-v1"], "eval --env goes with --exported FILE"),
        (["export", "no-such-run"], "No run in no-such-run"),
    ],
)
def test_cli_export_bad_input(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "X.onnx").write_bytes(b"")
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_eval_exported_in_an_env_of_another_shape(runs, tmp_path, capsys):
    out = tmp_path / "ppo.pt"
    assert main(["export", str(runs("ppo")), "--format", "torchscript", "--out", str(out)]) == 0
    assert main(["eval", "--exported", str(out), "--env", "CartPole-v1"]) == 2
    err = capsys.readouterr().err
    assert "takes 'observation' of shape [3]; env 'CartPole-v1' gives [4]" in err


def test_load_runtime_unknown_suffix(tmp_path):
    with pytest.raises(ValueError, match=r"Cannot tell the format of .*policy.bin"):
        load_runtime(tmp_path / "policy.bin")
