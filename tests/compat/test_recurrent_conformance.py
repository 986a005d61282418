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
