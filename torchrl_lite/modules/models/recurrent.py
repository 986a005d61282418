"""Recurrent TensorDict modules: ``LSTMModule``, ``GRUModule`` and ``set_recurrent_mode``.

The hidden states travel in the TensorDict, like observations, so that collectors, replay
buffers and batched envs need nothing special:

* in: ``[in_key, *hidden_keys, "is_init"]``; out: ``[out_key, ("next", hidden_key), ...]``.
* Hidden states are stored ``[*B, num_layers, hidden_size]`` (batch first). Where
  ``"is_init"`` is True (the first step after a reset) the input hidden state is replaced
  by zeros. A TensorDict with no hidden state at all starts from zeros too.
* **Step mode** (the default, for collection): every element of the TensorDict is one
  step, inputs ``[*B, F]``.
* **Sequence mode** (``with set_recurrent_mode(True):``, for training): the last batch
  dim is time, inputs ``[*B, T, F]`` (an unbatched ``[F]`` is one step); only the hidden
  state at ``t = 0`` (and after each ``"is_init"``) is read. Sequences are split at the resets into segments that are run
  together in one packed call, so the outputs equal step-by-step execution. The next
  hidden state is written at the last step of each segment and is zero at the other
  steps (as TorchRL does).

``make_tensordict_primer()`` returns the env transform that adds the hidden-state specs
and zeros at reset.
"""

from __future__ import annotations

import contextvars
import copy

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import unravel_key, unravel_key_list
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
from torch.utils._contextlib import _DecoratorContextManager

from torchrl_lite import _keys as K
from torchrl_lite._utils import missing_key_message
from torchrl_lite.modules.models._python_rnn import python_rnn

__all__ = ["LSTMModule", "GRUModule", "set_recurrent_mode", "recurrent_mode"]

_MODE: contextvars.ContextVar[bool | None] = contextvars.ContextVar(
    "torchrl_lite_recurrent_mode", default=None
)
_MODE_NAMES = {"recurrent": True, "sequential": False}


def recurrent_mode() -> bool:
    """Whether recurrent modules currently run over whole sequences (see ``set_recurrent_mode``).

    Example:
        >>> recurrent_mode()
        False
        >>> with set_recurrent_mode(True):
        ...     recurrent_mode()
        True
    """
    return bool(_MODE.get())


class set_recurrent_mode(_DecoratorContextManager):  # noqa: N801 (TorchRL's name)
    """Context manager / decorator: recurrent modules run over sequences (True) or step by step.

    Inside the context, the setting overrides each module's ``default_recurrent_mode``.

    Args:
        mode: ``True`` or ``"recurrent"`` for sequence mode (training on ``[*B, T]``
            TensorDicts); ``False`` or ``"sequential"`` for step mode (collection).

    Example:
        >>> with set_recurrent_mode(True):
        ...     print(recurrent_mode())
        True
    """

    def __init__(self, mode: bool | str = True):
        super().__init__()
        if isinstance(mode, str):
            if mode.lower() not in _MODE_NAMES:
                raise ValueError(
                    f"set_recurrent_mode accepts True/False, 'recurrent' or 'sequential', got {mode!r}"
                )
            mode = _MODE_NAMES[mode.lower()]
        self.mode = bool(mode)
        self._token = None

    def clone(self) -> set_recurrent_mode:
        return type(self)(self.mode)

    def __enter__(self) -> None:
        self._token = _MODE.set(self.mode)

    def __exit__(self, *exc) -> None:
        _MODE.reset(self._token)


class _RecurrentModule(TensorDictModuleBase):
    """Shared wiring of ``LSTMModule`` and ``GRUModule`` (subclasses set the rnn class)."""

    _rnn_class: type[nn.RNNBase]
    python_based = False  # subclasses: run ``python_rnn`` instead of the fused kernel
    _rnn_name: str
    _hidden_names: tuple[str, ...]

    def __init__(  # noqa: PLR0913, C901 (TorchRL's signature; the argument checks of TorchRL's signature)
        self,
        input_size,
        hidden_size,
        num_layers,
        bias,
        batch_first,
        dropout,
        bidirectional,
        in_key,
        in_keys,
        out_key,
        out_keys,
        device,
        rnn,
        default_recurrent_mode,
    ):
        super().__init__()
        if isinstance(input_size, self._rnn_class):  # LSTMModule(nn.LSTM(...), in_keys=...)
            rnn, input_size = input_size, None
        if rnn is not None:
            if not isinstance(rnn, self._rnn_class):
                raise TypeError(
                    f"{type(self).__name__} wraps a {self._rnn_class.__name__}, got {type(rnn).__name__}."
                )
            if input_size is not None or hidden_size is not None:
                raise ValueError(
                    f"Pass either {self._rnn_name}= or input_size/hidden_size, not both."
                )
        else:
            if input_size is None or hidden_size is None:
                raise ValueError(
                    f"{type(self).__name__} needs input_size and hidden_size (or {self._rnn_name}=)."
                )
            if not batch_first:
                raise ValueError(
                    f"{type(self).__name__} stores time after the batch dims: batch_first must be True."
                )
            sizes = {"input_size": input_size, "hidden_size": hidden_size, "num_layers": num_layers}
            for name, value in sizes.items():
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(
                        f"{type(self).__name__}: {name} must be an int >= 1, got {value!r}."
                    )
            rnn = self._rnn_class(
                input_size,
                hidden_size,
                num_layers=num_layers,
                bias=bias,
                batch_first=True,
                dropout=dropout,
                bidirectional=bidirectional,
                device=device,
            )
        if not rnn.batch_first:
            raise ValueError(f"The wrapped {self._rnn_class.__name__} must have batch_first=True.")
        if rnn.bidirectional:
            raise ValueError(f"{type(self).__name__} does not support bidirectional RNNs.")
        if getattr(rnn, "proj_size", 0):
            raise ValueError(f"{type(self).__name__} does not support proj_size > 0.")
        self.rnn = rnn
        n = len(self._hidden_names)
        if (in_key is None) == (in_keys is None):
            raise ValueError(f"{type(self).__name__} needs exactly one of in_key and in_keys.")
        if in_keys is None:
            in_keys = [in_key, *self._hidden_names]
        in_keys = unravel_key_list(list(in_keys) if not isinstance(in_keys, str) else [in_keys])
        if in_keys and in_keys[-1] == K.IS_INIT and len(in_keys) == n + 2:
            in_keys = in_keys[:-1]
        if len(in_keys) != n + 1:
            raise ValueError(
                f"{type(self).__name__} in_keys must be [input, {', '.join(self._hidden_names)}] "
                f"({n + 1} keys), got {in_keys}."
            )
        if (out_key is None) == (out_keys is None):
            raise ValueError(f"{type(self).__name__} needs exactly one of out_key and out_keys.")
        if out_keys is None:  # the next hidden states go under "next"
            out_keys = [out_key, *(unravel_key((K.NEXT, key)) for key in in_keys[1:])]
        out_keys = unravel_key_list(list(out_keys) if not isinstance(out_keys, str) else [out_keys])
        if len(out_keys) != n + 1:
            raise ValueError(
                f"{type(self).__name__} out_keys must be [output, {', '.join(self._hidden_names)}] "
                f"({n + 1} keys), got {out_keys}."
            )
        self.in_keys = [*in_keys, K.IS_INIT]
        self.out_keys = out_keys
        self._recurrent_mode = bool(default_recurrent_mode)

    # -- configuration -----------------------------------------------------------------
    @property
    def recurrent_mode(self) -> bool:
        """Sequence mode if set by ``set_recurrent_mode``, else ``default_recurrent_mode``."""
        mode = _MODE.get()
        return self._recurrent_mode if mode is None else mode

    def set_recurrent_mode(self, mode: bool = True) -> _RecurrentModule:
        """A copy of this module (sharing its parameters) whose default mode is ``mode``."""
        out = copy.copy(self)
        out._recurrent_mode = bool(mode)
        return out

    def make_python_based(self) -> _RecurrentModule:
        """Run the rnn step by step in Python from now on (in place; returns self): the
        form ``torch.export`` / ``torch.compile`` / ``vmap`` can trace. Same outputs."""
        self.python_based = True
        return self

    def make_cudnn_based(self) -> _RecurrentModule:
        """Run the fused ``nn.LSTM`` / ``nn.GRU`` kernel again (in place; returns self)."""
        self.python_based = False
        return self

    @property
    def _state_shape(self) -> tuple[int, int]:
        return (self.rnn.num_layers, self.rnn.hidden_size)

    def make_tensordict_primer(self):
        """The ``TensorDictPrimer`` that adds this module's hidden states to an env.

        The specs are ``Unbounded([num_layers, hidden_size])`` (expanded to the env's batch);
        the transform writes zeros at every reset.
        """
        from torchrl_lite.data.tensor_specs import Unbounded
        from torchrl_lite.envs.transforms.primer import TensorDictPrimer

        dtype = self.rnn.weight_ih_l0.dtype
        return TensorDictPrimer(
            {key: Unbounded(shape=self._state_shape, dtype=dtype) for key in self.in_keys[1:-1]}
        )

    # -- forward -------------------------------------------------------------------------
    def _missing(self, td: TensorDictBase, key, hint: str = "") -> KeyError:
        return KeyError(
            f"{type(self).__name__} (in_keys={self.in_keys}) reads {key!r}, which the input "
            f"TensorDict lacks. {missing_key_message(key, td.keys(True, True))}{hint}"
        )

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        in_key, *hidden_keys, init_key = self.in_keys
        x = tensordict.get(in_key, None)
        if x is None:
            raise self._missing(tensordict, in_key)
        is_init = tensordict.get(init_key, None)
        if is_init is None:
            raise self._missing(
                tensordict,
                init_key,
                " Add InitTracker() to the env's transforms: it writes 'is_init' at reset.",
            )
        if is_init.dtype != torch.bool:
            is_init = is_init.bool()
        hidden = [tensordict.get(key, None) for key in hidden_keys]
        if any(h is None for h in hidden) and not all(h is None for h in hidden):
            missing = hidden_keys[[h is None for h in hidden].index(True)]
            raise self._missing(tensordict, missing, " Pass all the hidden states or none.")
        hidden = None if hidden[0] is None else hidden
        if self.recurrent_mode:
            y, h_next = self._run_sequence(x, hidden, is_init, hidden_keys)
        else:
            y, h_next = self._run_steps(x, hidden, is_init, hidden_keys)
        tensordict.set(self.out_keys[0], y)
        for key, h in zip(self.out_keys[1:], h_next):
            tensordict.set(key, h)
        return tensordict

    def _check_hidden(self, hidden, keys, batch: tuple) -> None:
        expected = (*batch, *self._state_shape)
        for key, h in zip(keys, hidden):
            if tuple(h.shape) != expected:
                raise ValueError(
                    f"{type(self).__name__}: hidden state {key!r} has shape {list(h.shape)}, "
                    f"expected {list(expected)} ([*batch, num_layers, hidden_size])."
                )

    def _call_rnn(self, x, h0: list[torch.Tensor]):
        """Run the rnn from batch-first states ``[N, L, H]``; return y and ``[N, L, H]`` states."""
        states = [h.transpose(0, 1).contiguous() for h in h0]  # [L, N, H]
        init = tuple(states) if len(states) > 1 else states[0]
        y, h_n = python_rnn(self.rnn, x, init) if self.python_based else self.rnn(x, init)
        h_n = h_n if isinstance(h_n, tuple) else (h_n,)
        return y, [h.transpose(0, 1) for h in h_n]  # [N, L, H]

    def _run_steps(self, x, hidden, is_init, keys):
        """Step mode: each of the ``N = prod(B)`` elements is one step. x: ``[*B, F]``."""
        batch = tuple(x.shape[:-1])
        n = x[..., 0].numel()
        shape = (n, *self._state_shape)
        if hidden is None:
            h0 = [x.new_zeros(shape) for _ in keys]
        else:
            self._check_hidden(hidden, keys, batch)
            reset = is_init.reshape(n, 1, 1)
            h0 = [h.reshape(shape).masked_fill(reset, 0.0) for h in hidden]
        y, h_n = self._call_rnn(x.reshape(n, 1, x.shape[-1]), h0)  # y: [N, 1, H]
        out_shape = (*batch, *self._state_shape)
        return y.reshape(*batch, y.shape[-1]), [h.reshape(out_shape) for h in h_n]

    def _run_sequence(self, x, hidden, is_init, keys):
        """Sequence mode: x is ``[*B, T, F]``, hidden ``[*B, T, L, H]``, is_init ``[*B, T, 1]``.

        A single step ``[F]`` (an unbatched TensorDict, e.g. ``policy(env.reset())``) is a
        sequence of length 1, as in TorchRL.
        """
        if x.dim() == 1:
            hidden = None if hidden is None else [h.unsqueeze(0) for h in hidden]
            y, h_next = self._run_sequence(x.unsqueeze(0), hidden, is_init.reshape(1, 1), keys)
            return y.squeeze(0), [h.squeeze(0) for h in h_next]
        if x.dim() < 1:
            raise ValueError(
                f"{type(self).__name__} in recurrent mode expects inputs [*B, T, F] with time as "
                f"the last batch dim, got a scalar input."
            )
        batch, steps, feat = tuple(x.shape[:-2]), x.shape[-2], x.shape[-1]
        if hidden is not None:
            self._check_hidden(hidden, keys, (*batch, steps))
        rows = x[..., 0, 0].numel()
        x = x.reshape(rows, steps, feat)  # [B, T, F]
        is_init = is_init.reshape(rows, steps)  # [B, T]
        flat = rows * steps
        state = (flat, *self._state_shape)
        hidden = (
            [x.new_zeros(state) for _ in keys]
            if hidden is None
            else [h.reshape(state) for h in hidden]  # [B*T, L, H]
        )
        if steps > 1 and bool(is_init[:, 1:].any()):
            y, ends, h_n = self._segments(x, hidden, is_init)
        else:  # one segment per row: a single rnn call
            starts = torch.arange(0, flat, steps, device=x.device)  # [B]
            reset = is_init[:, 0].reshape(rows, 1, 1)
            h0 = [h[starts].masked_fill(reset, 0.0) for h in hidden]
            y, h_n = self._call_rnn(x, h0)  # [B, T, H]
            ends = starts + steps - 1
        h_next = []
        for h in h_n:  # the final state at the last step of each segment, zeros elsewhere
            buf = x.new_zeros(state)
            buf = buf.index_put((ends,), h)
            h_next.append(buf.reshape(*batch, steps, *self._state_shape))
        return y.reshape(*batch, steps, y.shape[-1]), h_next

    def _segments(self, x, hidden, is_init):
        """Split ``[B, T]`` rows at the resets into N segments; run them in one packed call."""
        rows, steps, feat = x.shape
        starts = is_init.clone()
        starts[:, 0] = True
        flat_starts = starts.reshape(-1)  # [B*T]
        start_idx = flat_starts.nonzero().squeeze(-1)  # [N] flat index of each segment start
        n_seg = start_idx.numel()
        seg_id = flat_starts.long().cumsum(0) - 1  # [B*T] segment of each step
        bounds = torch.cat([start_idx, start_idx.new_tensor([rows * steps])])
        lengths = bounds[1:] - bounds[:-1]  # [N]
        pos = torch.arange(rows * steps, device=x.device) - start_idx[seg_id]  # [B*T]
        lengths_cpu = lengths.cpu()
        max_len = int(lengths_cpu.max())
        padded = x.new_zeros(n_seg, max_len, feat)
        padded = padded.index_put((seg_id, pos), x.reshape(-1, feat))  # [N, T', F]
        reset = is_init.reshape(-1)[start_idx].reshape(n_seg, 1, 1)
        h0 = [h[start_idx].masked_fill(reset, 0.0) for h in hidden]  # [N, L, H]
        packed = pack_padded_sequence(padded, lengths_cpu, batch_first=True, enforce_sorted=False)
        y_packed, h_n = self._call_rnn(packed, h0)
        y_pad, _ = pad_packed_sequence(y_packed, batch_first=True, total_length=max_len)
        y = y_pad[seg_id, pos].reshape(rows, steps, -1)  # [B, T, H]
        return y, start_idx + lengths - 1, h_n

    def extra_repr(self) -> str:
        return f"in_keys={self.in_keys}, out_keys={self.out_keys}"


class LSTMModule(_RecurrentModule):
    """An ``nn.LSTM`` that reads and writes its hidden states ``h`` and ``c`` as TensorDict entries.

    Reads ``[in_key, "recurrent_state_h", "recurrent_state_c", "is_init"]`` and writes
    ``[out_key, ("next", "recurrent_state_h"), ("next", "recurrent_state_c")]``; see the
    module docstring for step and sequence modes. Missing hidden states start from zeros.

    Args:
        input_size: input features (or an ``nn.LSTM`` to wrap, as TorchRL accepts).
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: must be True (kept for TorchRL's signature).
        dropout: dropout between layers.
        in_key: the input key; the hidden keys are then the defaults.
        in_keys: ``[input, h, c]`` keys (instead of ``in_key``).
        out_key: the output key; the next hidden keys are then ``("next", h)``, ``("next", c)``.
        out_keys: ``[output, h, c]`` as given (TorchRL's rule: pass ``("next", h)``, ...).
        device: where to create the parameters.
        lstm: an existing ``nn.LSTM`` (batch_first=True) instead of the size arguments.
        default_recurrent_mode: the mode outside any ``set_recurrent_mode`` context.
        python_based: run the LSTM step by step in Python (for ``torch.vmap`` /
            ``torch.compile``); same outputs, slower.

    Example:
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> td = TensorDict({"obs": torch.randn(4, 3), "is_init": torch.ones(4, 1, dtype=torch.bool)}, [4])
        >>> td = lstm(td)
        >>> td["features"].shape, td["next", "recurrent_state_c"].shape
        (torch.Size([4, 8]), torch.Size([4, 1, 8]))
        >>> seq = TensorDict({"obs": torch.randn(4, 5, 3), "is_init": torch.zeros(4, 5, 1, dtype=torch.bool)}, [4, 5])
        >>> with set_recurrent_mode(True):
        ...     lstm(seq)["features"].shape
        torch.Size([4, 5, 8])
    """

    _rnn_class = nn.LSTM
    _rnn_name = "lstm"
    _hidden_names = ("recurrent_state_h", "recurrent_state_c")

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        input_size: int | nn.LSTM | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        *,
        in_key=None,
        in_keys=None,
        out_key=None,
        out_keys=None,
        device=None,
        lstm: nn.LSTM | None = None,
        default_recurrent_mode: bool | None = None,
        python_based: bool = False,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            False,
            in_key,
            in_keys,
            out_key,
            out_keys,
            device,
            lstm,
            default_recurrent_mode,
        )
        self.python_based = bool(python_based)

    @property
    def lstm(self) -> nn.LSTM:
        """The wrapped ``nn.LSTM``."""
        return self.rnn


class GRUModule(_RecurrentModule):
    """An ``nn.GRU`` that reads and writes its hidden state as a TensorDict entry.

    Reads ``[in_key, "recurrent_state", "is_init"]`` and writes
    ``[out_key, ("next", "recurrent_state")]``; see the module docstring for step and
    sequence modes. A missing input or ``"is_init"`` raises ``KeyError``; a missing hidden
    state starts from zeros.

    Args:
        input_size: input features (or an ``nn.GRU`` to wrap).
        hidden_size: hidden units.
        num_layers: stacked layers.
        bias: use biases.
        batch_first: must be True (kept for TorchRL's signature).
        dropout: dropout between layers.
        in_key: the input key; the hidden key is then ``"recurrent_state"``.
        in_keys: ``[input, hidden]`` keys (instead of ``in_key``).
        out_key: the output key; the next hidden key is then ``("next", "recurrent_state")``.
        out_keys: ``[output, hidden]``, as given: write ``("next", hidden)`` for the state
            the next step reads.
        device: where to create the parameters.
        gru: an existing ``nn.GRU`` (batch_first=True) instead of the size arguments.
        default_recurrent_mode: the mode outside any ``set_recurrent_mode`` context.
        python_based: run the GRU step by step in Python on the ``nn.GRU``'s weights
            (TorchRL's switch); same outputs, slower.

    Example:
        >>> gru = GRUModule(input_size=3, hidden_size=8, num_layers=2, in_key="obs", out_key="features")
        >>> td = TensorDict({"obs": torch.randn(4, 3), "is_init": torch.ones(4, 1, dtype=torch.bool)}, [4])
        >>> gru(td)["next", "recurrent_state"].shape
        torch.Size([4, 2, 8])
    """

    _rnn_class = nn.GRU
    _rnn_name = "gru"
    _hidden_names = ("recurrent_state",)

    def __init__(  # noqa: PLR0913 (TorchRL's signature)
        self,
        input_size: int | nn.GRU | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0.0,
        *,
        in_key=None,
        in_keys=None,
        out_key=None,
        out_keys=None,
        device=None,
        gru: nn.GRU | None = None,
        default_recurrent_mode: bool | None = None,
        python_based: bool = False,
    ):
        super().__init__(
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            False,
            in_key,
            in_keys,
            out_key,
            out_keys,
            device,
            gru,
            default_recurrent_mode,
        )
        self.python_based = bool(python_based)

    @property
    def gru(self) -> nn.GRU:
        """The wrapped ``nn.GRU``."""
        return self.rnn
