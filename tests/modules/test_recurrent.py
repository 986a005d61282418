"""LSTMModule / GRUModule: step mode equals sequence mode (with resets), matches a manual
torch.nn loop, honours is_init, and the primer adds the hidden-state specs to an env."""

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from torchrl_lite.modules import (
    MLP,
    GRUModule,
    LSTMModule,
    recurrent_mode,
    set_recurrent_mode,
)

B, T, F, H = 3, 9, 4, 6


def _is_init():
    """Resets at t=0 in rows 0 and 2, and in the middle of every row."""
    is_init = torch.zeros(B, T, 1, dtype=torch.bool)
    is_init[0, 0] = is_init[2, 0] = True
    is_init[0, 4] = True
    is_init[1, 2] = is_init[1, 3] = True  # a one-step segment
    is_init[2, 8] = True  # a reset at the last step
    return is_init


def _module(kind, num_layers):
    cls = LSTMModule if kind == "lstm" else GRUModule
    return cls(input_size=F, hidden_size=H, num_layers=num_layers, in_key="x", out_key="y")


def _sequence_td(module):
    keys = module.in_keys[1:-1]
    td = TensorDict({"x": torch.randn(B, T, F), "is_init": _is_init()}, [B, T])
    for key in keys:  # stored states: only t=0 (and ignored where is_init) may matter
        td[key] = torch.randn(B, T, module.rnn.num_layers, H)
    return td


def _run_step_by_step(module, td):
    """Collection-style: one step at a time, carrying ("next", h) to the next step."""
    keys = module.in_keys[1:-1]
    outs, nexts = [], []
    state = {key: td[key][:, 0] for key in keys}
    for t in range(T):
        step = TensorDict({"x": td["x"][:, t], "is_init": td["is_init"][:, t], **state}, [B])
        step = module(step)
        outs.append(step["y"])
        state = {key: step["next", key] for key in keys}
        nexts.append(state)
    return torch.stack(outs, 1), nexts


def _manual(kind, rnn, td):
    """Reference: a plain loop over rows and steps calling the torch rnn on single steps."""
    keys = ["recurrent_state_h", "recurrent_state_c"] if kind == "lstm" else ["recurrent_state"]
    out = torch.zeros(B, T, H)
    for b in range(B):
        state = [td[k][b, 0].unsqueeze(1) for k in keys]  # [L, 1, H]
        for t in range(T):
            if td["is_init"][b, t, 0]:
                state = [torch.zeros_like(s) for s in state]
            x = td["x"][b, t].reshape(1, 1, F)
            if kind == "lstm":
                y, (h, c) = rnn(x, (state[0], state[1]))
                state = [h, c]
            else:
                y, h = rnn(x, state[0])
                state = [h]
            out[b, t] = y[0, 0]
    return out


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("num_layers", [1, 2])
def test_recurrent_step_by_step_equals_sequence_mode_with_resets(kind, num_layers):
    module = _module(kind, num_layers)
    td = _sequence_td(module)
    with torch.no_grad():
        steps_y, steps_next = _run_step_by_step(module, td)
        with set_recurrent_mode(True):
            seq = module(td.clone())
        manual = _manual(kind, module.rnn, td)
    torch.testing.assert_close(seq["y"], steps_y, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(seq["y"], manual, rtol=1e-5, atol=1e-5)
    # the next hidden state is exact at the last step of each segment, zero elsewhere
    is_init = td["is_init"].squeeze(-1)
    seg_end = torch.cat([is_init[:, 1:], torch.ones(B, 1, dtype=torch.bool)], 1)
    for key in module.in_keys[1:-1]:
        got = seq["next", key]
        assert got.shape == (B, T, num_layers, H)
        for b in range(B):
            for t in range(T):
                if seg_end[b, t]:
                    torch.testing.assert_close(
                        got[b, t], steps_next[t][key][b], rtol=1e-5, atol=1e-5
                    )
                else:
                    assert (got[b, t] == 0).all()


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_sequence_without_resets_uses_the_stored_first_state(kind):
    module = _module(kind, 1)
    td = _sequence_td(module)
    td["is_init"] = torch.zeros(B, T, 1, dtype=torch.bool)
    with torch.no_grad(), set_recurrent_mode(True):
        seq = module(td.clone())
    torch.testing.assert_close(seq["y"], _manual(kind, module.rnn, td), rtol=1e-5, atol=1e-5)


def test_recurrent_sequence_mode_backward_and_extra_batch_dims():
    module = _module("lstm", 1)
    td = TensorDict(
        {"x": torch.randn(2, B, T, F), "is_init": _is_init().expand(2, B, T, 1).clone()}, [2, B, T]
    )
    with set_recurrent_mode(True):
        out = module(td)
    assert out["y"].shape == (2, B, T, H)
    out["y"].sum().backward()
    assert all(p.grad is not None and p.grad.isfinite().all() for p in module.parameters())


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_recurrent_is_init_resets_hidden_state(kind):
    module = _module(kind, 2)
    keys = module.in_keys[1:-1]
    x = torch.randn(4, F)
    state = {k: torch.randn(4, 2, H) for k in keys}
    is_init = torch.tensor([[True], [False], [True], [False]])
    out = module(TensorDict({"x": x, "is_init": is_init, **state}, [4]))
    zeros = {k: torch.zeros(4, 2, H) for k in keys}
    fresh = module(
        TensorDict({"x": x, "is_init": torch.zeros(4, 1, dtype=torch.bool), **zeros}, [4])
    )
    kept = module(
        TensorDict({"x": x, "is_init": torch.zeros(4, 1, dtype=torch.bool), **state}, [4])
    )
    torch.testing.assert_close(out["y"][is_init[:, 0]], fresh["y"][is_init[:, 0]])
    torch.testing.assert_close(out["y"][~is_init[:, 0]], kept["y"][~is_init[:, 0]])
    assert not torch.allclose(kept["y"][0], fresh["y"][0])
    # no hidden state at all: start from zeros
    none = module(TensorDict({"x": x, "is_init": torch.zeros(4, 1, dtype=torch.bool)}, [4]))
    torch.testing.assert_close(none["y"], fresh["y"])


def test_recurrent_keys_and_modes():
    lstm = LSTMModule(
        input_size=F, hidden_size=H, in_keys=["x", "h", "c"], out_keys=["y", "h", ("next", "c")]
    )
    assert lstm.in_keys == ["x", "h", "c", "is_init"]
    assert lstm.out_keys == ["y", "h", ("next", "c")]  # as given, as TorchRL keeps them
    gru = GRUModule(nn.GRU(F, H, batch_first=True), in_keys=["x", "h"], out_keys=["y", "h"])
    assert gru.gru.hidden_size == H
    assert not recurrent_mode() and not gru.recurrent_mode
    with set_recurrent_mode(True):
        assert recurrent_mode() and gru.recurrent_mode
        with set_recurrent_mode("sequential"):
            assert not gru.recurrent_mode
    seq_gru = gru.set_recurrent_mode(True)
    assert seq_gru.recurrent_mode and not gru.recurrent_mode
    assert seq_gru.gru is gru.gru
    with set_recurrent_mode(False):
        assert not seq_gru.recurrent_mode
    assert LSTMModule(
        input_size=F, hidden_size=H, in_key="x", out_key="y", default_recurrent_mode=True
    ).recurrent_mode


def test_recurrent_bad_construction_raises():
    with pytest.raises(ValueError, match="exactly one of in_key and in_keys"):
        LSTMModule(input_size=F, hidden_size=H, out_key="y")
    with pytest.raises(ValueError, match="3 keys"):
        LSTMModule(input_size=F, hidden_size=H, in_keys=["x", "h"], out_key="y")
    with pytest.raises(ValueError, match="batch_first=True"):
        LSTMModule(nn.LSTM(F, H), in_key="x", out_key="y")
    with pytest.raises(ValueError, match="needs input_size and hidden_size"):
        GRUModule(in_key="x", out_key="y")


def test_recurrent_missing_in_key_raises_keyerror_naming_key_module_and_present_keys():
    module = _module("lstm", 1)
    td = TensorDict({"obs": torch.randn(2, F), "is_init": torch.ones(2, 1, dtype=torch.bool)}, [2])
    with pytest.raises(KeyError) as err:
        module(td)
    msg = str(err.value)
    assert "'x'" in msg and "LSTMModule" in msg and "obs" in msg and "is_init" in msg
    with pytest.raises(KeyError, match="InitTracker"):
        module(TensorDict({"x": torch.randn(2, F)}, [2]))
    with pytest.raises(KeyError, match="recurrent_state_c"):
        module(
            TensorDict(
                {
                    "x": torch.randn(2, F),
                    "is_init": torch.ones(2, 1, dtype=torch.bool),
                    "recurrent_state_h": torch.zeros(2, 1, H),
                },
                [2],
            )
        )


def test_recurrent_bad_hidden_shape_raises():
    module = _module("gru", 2)
    td = TensorDict(
        {
            "x": torch.randn(2, F),
            "is_init": torch.ones(2, 1, dtype=torch.bool),
            "recurrent_state": torch.zeros(2, 1, H),
        },
        [2],
    )
    with pytest.raises(ValueError, match=r"expected \[2, 2, 6\]"):
        module(td)


# -- in an env ----------------------------------------------------------------------------
def _transforms():
    return pytest.importorskip(
        "torchrl_lite.envs.transforms.primer", reason="env transforms not importable yet"
    )


def test_primer_adds_specs_and_check_env_specs_passes():
    _transforms()
    from torchrl_lite.envs import GymEnv, check_env_specs
    from torchrl_lite.envs.transforms import InitTracker, TransformedEnv

    lstm = LSTMModule(
        input_size=3, hidden_size=H, num_layers=2, in_key="observation", out_key="embed"
    )
    env = TransformedEnv(GymEnv("Pendulum-v1"), InitTracker())
    env.append_transform(lstm.make_tensordict_primer())
    for key in ("recurrent_state_h", "recurrent_state_c"):
        assert env.observation_spec[key].shape == (2, H)
    check_env_specs(env)
    reset = env.reset()
    assert (reset["recurrent_state_h"] == 0).all()


def test_rollout_then_sequence_mode_reproduces_collection_outputs():
    _transforms()
    from torchrl_lite.envs import GymEnv
    from torchrl_lite.envs.transforms import InitTracker, StepCounter, TransformedEnv

    env = TransformedEnv(GymEnv("Pendulum-v1"), StepCounter(max_steps=4))
    env.append_transform(InitTracker())
    gru = GRUModule(input_size=3, hidden_size=H, in_key="observation", out_key="embed")
    env.append_transform(gru.make_tensordict_primer())
    policy = TensorDictSequential(
        gru, TensorDictModule(MLP(out_features=1, num_cells=[8]), ["embed"], ["action"])
    )
    with torch.no_grad():
        data = env.rollout(11, policy, break_when_any_done=False)
    assert data["is_init"][[0, 4, 8]].all() and data["is_init"].sum() == 3
    # the hidden state was carried between steps and reset after each episode
    assert (data["recurrent_state"][[0, 4, 8]] == 0).all()
    torch.testing.assert_close(data["recurrent_state"][1:4], data["next", "recurrent_state"][:3])
    collected = data["embed"].clone()
    with torch.no_grad(), set_recurrent_mode(True):
        replay = gru(data.unsqueeze(0).exclude("embed"))
    torch.testing.assert_close(replay["embed"][0], collected, rtol=1e-5, atol=1e-5)


def test_primer_partial_reset_and_standalone_forward():
    _transforms()
    from torchrl_lite.data import Unbounded
    from torchrl_lite.envs.transforms.primer import TensorDictPrimer

    primer = TensorDictPrimer({"h": Unbounded((2,))}, default_value=1.5)
    td = primer(TensorDict({}, [3]))
    torch.testing.assert_close(td["h"], torch.full((3, 2), 1.5))
    with pytest.raises(TypeError, match="TensorSpec"):
        TensorDictPrimer({"h": 3})
    with pytest.raises(KeyError, match="without a spec"):
        TensorDictPrimer({"h": Unbounded(())}, default_value={"g": 0.0})


def test_batched_env_partial_resets_keep_other_states_and_replay_matches():
    _transforms()
    from torchrl_lite.envs import GymEnv
    from torchrl_lite.envs.transforms import InitTracker, StepCounter, TransformedEnv

    env = TransformedEnv(GymEnv("Pendulum-v1", num_envs=3), StepCounter(max_steps=5))
    env.append_transform(InitTracker())
    lstm = LSTMModule(input_size=3, hidden_size=H, in_key="observation", out_key="embed")
    env.append_transform(lstm.make_tensordict_primer())
    policy = TensorDictSequential(
        lstm, TensorDictModule(MLP(out_features=1, num_cells=[8]), ["embed"], ["action"])
    )
    with torch.no_grad():
        env.reset()
        first = env.rollout(3, policy, break_when_any_done=False)
        # start the next rollout where env 1 alone is reset: the others keep their states
        start = first[:, -1].exclude("next").update(first[:, -1]["next"].exclude("reward"))
        start["_reset"] = torch.tensor([[False], [True], [False]])
        start = env.reset(start)
        assert start["is_init"].flatten().tolist() == [False, True, False]
        assert (start["recurrent_state_h"][1] == 0).all()
        torch.testing.assert_close(
            start["recurrent_state_c"][[0, 2]], first["next", "recurrent_state_c"][[0, 2], -1]
        )
        data = env.rollout(
            12, policy, break_when_any_done=False, auto_reset=False, tensordict=start
        )
    is_init = data["is_init"].squeeze(-1)
    assert (data["recurrent_state_h"][is_init] == 0).all()
    carried = ~is_init[:, 1:]
    torch.testing.assert_close(
        data["recurrent_state_h"][:, 1:][carried],
        data["next", "recurrent_state_h"][:, :-1][carried],
    )
    with torch.no_grad(), set_recurrent_mode(True):
        replay = lstm(data.exclude("embed"))
    torch.testing.assert_close(replay["embed"], data["embed"], rtol=1e-5, atol=1e-5)


def test_set_recurrent_mode_as_decorator():
    @set_recurrent_mode(True)
    def inside():
        return recurrent_mode()

    assert inside() and not recurrent_mode()
    with pytest.raises(ValueError, match="'recurrent' or 'sequential'"):
        set_recurrent_mode("train")


def test_primer_on_a_batched_env_carries_states():
    _transforms()
    batched = pytest.importorskip(
        "torchrl_lite.envs.batched_envs", reason="batched envs not importable yet"
    )
    from torchrl_lite.envs import GymEnv, check_env_specs
    from torchrl_lite.envs.transforms import Compose, InitTracker, StepCounter, TransformedEnv

    lstm = LSTMModule(input_size=3, hidden_size=H, in_key="observation", out_key="embed")
    env = TransformedEnv(
        batched.SerialEnv(2, lambda: GymEnv("Pendulum-v1")),
        Compose(StepCounter(max_steps=4), InitTracker(), lstm.make_tensordict_primer()),
    )
    check_env_specs(env)
    policy = TensorDictSequential(
        lstm, TensorDictModule(MLP(out_features=1, num_cells=[8]), ["embed"], ["action"])
    )
    with torch.no_grad():
        data = env.rollout(9, policy, break_when_any_done=False)
        with set_recurrent_mode(True):
            replay = lstm(data.exclude("embed"))
    assert (data["recurrent_state_h"][:, 1:4] != 0).any()
    torch.testing.assert_close(replay["embed"], data["embed"], rtol=1e-5, atol=1e-5)
    env.close()


@pytest.mark.parametrize("kind", ["SerialEnv", "ParallelEnv"])
def test_primer_inside_the_copies_of_a_batched_env_equals_one_outside(kind):
    """TorchRL declares primed entries as state: the batched env sends each copy its
    entries (and the policy's ("next", key)) with the action, so a primer in the copies
    gives the rollout of the same primer on the batched env."""
    _transforms()
    batched = pytest.importorskip(
        "torchrl_lite.envs.batched_envs", reason="batched envs not importable yet"
    )
    from torchrl_lite.envs import GymEnv, check_env_specs
    from torchrl_lite.envs.transforms import Compose, InitTracker, StepCounter, TransformedEnv

    lstm = LSTMModule(input_size=3, hidden_size=H, in_key="observation", out_key="embed")
    policy = TensorDictSequential(
        lstm, TensorDictModule(MLP(out_features=1, num_cells=[8]), ["embed"], ["action"])
    )

    def inner():
        return TransformedEnv(
            GymEnv("Pendulum-v1"),
            Compose(StepCounter(max_steps=4), InitTracker(), lstm.make_tensordict_primer()),
        )

    cls = getattr(batched, kind)
    env = cls(2, inner)
    reference = TransformedEnv(
        batched.SerialEnv(2, lambda: GymEnv("Pendulum-v1")),
        Compose(StepCounter(max_steps=4), InitTracker(), lstm.make_tensordict_primer()),
    )
    assert set(env.full_state_spec.keys()) >= {"recurrent_state_h", "recurrent_state_c"}
    check_env_specs(env)
    env.set_seed(0)
    reference.set_seed(0)
    with torch.no_grad():
        data = env.rollout(9, policy, break_when_any_done=False)
        expected = reference.rollout(9, policy, break_when_any_done=False)
    assert set(data.keys(True, True)) == set(expected.keys(True, True))
    for key in expected.keys(True, True):
        torch.testing.assert_close(data[key], expected[key], msg=f"{kind}: {key}")
    # the states were carried within episodes (reset to 0 at each of the 4-step starts)
    assert (data["recurrent_state_h"][:, 1:4] != 0).all()
    assert (data["recurrent_state_h"][:, [0, 4, 8]] == 0).all()
    env.close()
    reference.close()
