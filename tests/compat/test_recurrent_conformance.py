"""Recurrent modules called the way TorchRL's recurrent tutorials call them."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential

from torchrl_lite.modules import GRUModule, LSTMModule


def test_lstm_recurrent_mode_on_an_unbatched_step_runs_one_time_step():
    # dqn_with_rnn: policy = Seq(feature, lstm.set_recurrent_mode(True), ...); policy(env.reset())
    torch.manual_seed(0)
    lstm = LSTMModule(input_size=5, hidden_size=7, num_layers=2, in_key="emb", out_key="out")
    td = TensorDict(
        {
            "emb": torch.randn(5),
            "is_init": torch.zeros(1, dtype=torch.bool),
            "recurrent_state_h": torch.randn(2, 7),
            "recurrent_state_c": torch.randn(2, 7),
        },
        [],
    )
    out = lstm.set_recurrent_mode(True)(td.clone())

    # reference: nn.LSTM on one batch row of one step, states [L, 1, H]
    h0 = td["recurrent_state_h"].unsqueeze(1)
    c0 = td["recurrent_state_c"].unsqueeze(1)
    y, (h1, c1) = lstm.lstm(td["emb"].reshape(1, 1, 5), (h0, c0))
    torch.testing.assert_close(out["out"], y.reshape(7))
    torch.testing.assert_close(out["next", "recurrent_state_h"], h1.squeeze(1))
    torch.testing.assert_close(out["next", "recurrent_state_c"], c1.squeeze(1))


def test_gru_recurrent_mode_unbatched_step_resets_on_is_init():
    torch.manual_seed(0)
    gru = GRUModule(input_size=3, hidden_size=4, in_key="x", out_key="y")
    td = TensorDict(
        {
            "x": torch.randn(3),
            "is_init": torch.ones(1, dtype=torch.bool),
            "recurrent_state": torch.randn(1, 4),
        },
        [],
    )
    out = gru.set_recurrent_mode(True)(td.clone())
    y, h = gru.gru(td["x"].reshape(1, 1, 3), torch.zeros(1, 1, 4))
    torch.testing.assert_close(out["y"], y.reshape(4))
    torch.testing.assert_close(out["next", "recurrent_state"], h.reshape(1, 4))


def test_recurrent_mode_policy_initialises_lazy_layers_from_an_unbatched_reset():
    lstm = LSTMModule(input_size=6, hidden_size=8, in_key="emb", out_key="feat")
    policy = TensorDictSequential(
        TensorDictModule(torch.nn.LazyLinear(6), in_keys=["obs"], out_keys=["emb"]),
        lstm.set_recurrent_mode(True),
    )
    td = TensorDict({"obs": torch.randn(4), "is_init": torch.ones(1, dtype=torch.bool)}, [])
    out = policy(td)
    assert out["feat"].shape == (8,)
    assert out["next", "recurrent_state_h"].shape == (1, 8)


def test_recurrent_mode_rejects_a_scalar_input():
    lstm = LSTMModule(input_size=1, hidden_size=2, in_key="x", out_key="y")
    td = TensorDict({"x": torch.tensor(1.0), "is_init": torch.ones(1, dtype=torch.bool)}, [])
    with pytest.raises(ValueError, match="got a scalar input"):
        lstm.set_recurrent_mode(True)(td)


def test_explicit_out_keys_are_kept_as_given_and_python_based_switch():
    # export tutorial: LSTMModule(in_keys=["observation", "hidden0", "hidden1"],
    # out_keys=["intermediate", "hidden0", "hidden1"]).make_python_based()
    lstm = LSTMModule(
        input_size=4,
        hidden_size=5,
        num_layers=2,
        in_keys=["observation", "hidden0", "hidden1"],
        out_keys=["intermediate", "hidden0", "hidden1"],
    )
    assert lstm.out_keys == ["intermediate", "hidden0", "hidden1"]
    assert LSTMModule(input_size=4, hidden_size=5, in_key="x", out_key="y").out_keys == [
        "y",
        ("next", "recurrent_state_h"),
        ("next", "recurrent_state_c"),
    ]
    td = TensorDict(
        {
            "observation": torch.randn(3, 4),
            "hidden0": torch.randn(3, 2, 5),
            "hidden1": torch.randn(3, 2, 5),
            "is_init": torch.zeros(3, 1, dtype=torch.bool),
        },
        [3],
    )
    fused = lstm(td.clone())
    assert lstm.make_python_based() is lstm and lstm.python_based
    python = lstm(td.clone())
    for key in ("intermediate", "hidden0", "hidden1"):
        torch.testing.assert_close(python[key], fused[key], rtol=1e-5, atol=1e-6)
    assert lstm.make_cudnn_based() is lstm and not lstm.python_based


def test_recurrent_policy_exports_with_batch_size_transforms():
    # export tutorial: BatchSizeTransform(reshape_fn=...) as policy layers around a
    # python-based LSTM, then torch.export on unbatched inputs
    from torchrl_lite.envs import BatchSizeTransform
    from torchrl_lite.modules import MLP

    torch.manual_seed(0)
    lstm = LSTMModule(
        input_size=6,
        num_layers=2,
        hidden_size=8,
        in_keys=["observation", "hidden0", "hidden1"],
        out_keys=["intermediate", "hidden0", "hidden1"],
    ).make_python_based()
    policy = TensorDictSequential(
        BatchSizeTransform(reshape_fn=lambda td: td.unsqueeze(0)),
        lstm,
        TensorDictModule(
            MLP(in_features=8, out_features=3, num_cells=[16]), ["intermediate"], ["action"]
        ),
        BatchSizeTransform(reshape_fn=lambda td: td.squeeze(0)),
    )
    policy.select_out_keys("action", "hidden0", "hidden1")
    inputs = {
        "observation": torch.randn(6),
        "hidden0": torch.randn(2, 8),
        "hidden1": torch.randn(2, 8),
        "is_init": torch.zeros((), dtype=torch.bool),
    }
    exported = torch.export.export(policy, args=(), kwargs=inputs, strict=False)
    action, h0, h1 = exported.module()(**inputs)
    # reference: nn.LSTM on [1, 1, 6] with states [L, 1, H], then the MLP
    y, (rh0, rh1) = lstm.lstm(
        inputs["observation"].reshape(1, 1, 6),
        (inputs["hidden0"].unsqueeze(1), inputs["hidden1"].unsqueeze(1)),
    )
    torch.testing.assert_close(action, policy[2].module(y.reshape(8)), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h0, rh0.squeeze(1), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(h1, rh1.squeeze(1), rtol=1e-5, atol=1e-6)


def test_batch_size_transform_needs_a_batch_size_or_a_reshape():
    from torchrl_lite.envs import BatchSizeTransform

    with pytest.raises(TypeError, match="needs batch_size .* or reshape_fn"):
        BatchSizeTransform()
