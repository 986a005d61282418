"""What crosses Ray between the driver and its workers: weights out, batches back.

Pickling a TensorDict (or a dict of torch tensors) costs about a millisecond each way for
a 1000-frame Pendulum batch, more than Ray's own round trip. Here a TensorDict, or a
(nested) dict of tensors, is packed into one contiguous byte buffer (a numpy array: Ray
moves it without pickling its content, zero-copy out of the object store) and a small
layout saying where each tensor lives; unpacking makes one writable copy of the buffer
and rebuilds the TensorDict on views of it with the library's fast layer
(``torchrl_lite._td.new``).

* ``pack(obj)``: a ``Packed`` for a plain ``TensorDict`` (nested plain TensorDicts
  allowed, CPU tensors, no dim names) or a dict of CPU tensors; anything else (lazy
  stacks, non-tensor data, other devices) is returned unchanged and travels as Ray pickles
  it.
* ``unpack(obj)``: the TensorDict / dict back for a ``Packed`` (or a sealed one);
  anything else unchanged.
* ``weights_message(weights)``: what the driver sends for one weights version: the packed
  weights sealed in one ``bytes`` object when small (Ray passes ``bytes`` through without
  pickling and inlines small arguments in the call, so the workers need not fetch them
  from the object store), else one ``ray.put`` of them whose ref every worker receives.
* ``result_message(batch, meta)`` (worker) / ``open_result(message)`` (driver): a
  collection worker's ``(batch, meta)``, sealed in one ``bytes`` object when the batch is
  small, else with the batch packed on a numpy buffer (zero-copy out of the object store).

Example:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> td = TensorDict({"obs": torch.ones(4, 3), "next": {"reward": torch.zeros(4, 1)}}, [4])
    >>> back = unpack(pack(td))
    >>> bool((back == td).all()), back["next", "reward"].shape
    (True, torch.Size([4, 1]))
"""

from __future__ import annotations

import pickle

import numpy as np
import torch
from tensordict import TensorDict

from torchrl_lite import _td

__all__ = [
    "INLINE_BYTES",
    "Packed",
    "open_result",
    "pack",
    "pack_into",
    "packed_message",
    "result_message",
    "unpack",
    "unpack_from",
    "weights_message",
]

# weights smaller than this travel inside each call (Ray's own inline limit is 100 KiB);
# larger ones are put in the object store once per version
INLINE_BYTES = 64 * 1024
# buffers smaller than this travel as ``bytes`` (Ray's numpy path costs more per object),
# larger ones as a numpy array (zero-copy out of the object store)
_BYTES_BELOW = 1024 * 1024
_ALIGN = 16  # every tensor starts at a multiple of this (so any dtype can view it)
_SEAL = b"\x00torchrl_lite.transport\x00"  # starts a sealed message
_CPU = torch.device("cpu")
# the dtypes that travel packed, by name (what the layout holds)
_DTYPES = {
    name: getattr(torch, name)
    for name in ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                 "int8", "uint8", "bool", "complex64", "complex128")
}  # fmt: skip
_DTYPE_NAMES = {dtype: name for name, dtype in _DTYPES.items()}


class Packed:
    """Tensors packed in one byte buffer, with their layout (see the module docstring).

    ``layout`` is ``("td", batch_size, device, entries)`` or ``("dict", entries)``,
    ``entries`` a list of ``(key, ("t", dtype name, shape, offset, nbytes))`` or ``(key,
    nested layout)`` (strings, ints and tuples only); ``buffer`` the bytes (``bytes``, or a 1-D ``uint8`` numpy array when large).

    Example:
        >>> packed = pack({"w": torch.ones(2, 2), "b": torch.zeros(2)})
        >>> packed.layout[0], packed.nbytes  # each tensor starts on a 16-byte boundary
        ('dict', 32)
        >>> unpack(packed)["w"].sum().item()
        4.0
    """

    __slots__ = ("layout", "buffer")

    def __init__(self, layout, buffer: np.ndarray):
        self.layout, self.buffer = layout, buffer

    @property
    def nbytes(self) -> int:
        return len(self.buffer) if type(self.buffer) is bytes else int(self.buffer.nbytes)

    def __reduce__(self):
        return (Packed, (self.layout, self.buffer))


def _plan(obj, leaves: list, offset: int):
    """The layout of ``obj`` (None if it cannot be packed), appending its tensors to
    ``leaves``; returns ``(layout, next offset)``. The layout holds only strings, ints and
    tuples: it pickles fast."""
    if type(obj) is TensorDict:
        device = obj.device
        if device not in (None, _CPU) or any(n is not None for n in obj.names):
            return None, offset
        items = _td.entries(obj)
        items = items.items() if items is not None else obj.items()
        kind = ("td", tuple(obj.batch_size), None if device is None else "cpu")
    elif isinstance(obj, dict):  # a state_dict (OrderedDict) comes back as a dict
        items, kind = obj.items(), ("dict",)
    else:
        return None, offset
    entries = []
    for key, value in items:
        if type(key) is not str:
            return None, offset
        if isinstance(value, torch.Tensor):
            if type(value) not in (torch.Tensor, torch.nn.Parameter) or not value.is_cpu:
                return None, offset
            dtype = _DTYPE_NAMES.get(value.dtype)
            if dtype is None or value.layout is not torch.strided:  # sparse, quantized
                return None, offset
            nbytes = value.numel() * value.element_size()
            entries.append((key, ("t", dtype, tuple(value.shape), offset, nbytes)))
            leaves.append((value, offset, nbytes))
            offset += -(-nbytes // _ALIGN) * _ALIGN
        else:
            sub, offset = _plan(value, leaves, offset)
            if sub is None:
                return None, offset
            entries.append((key, sub))
    return (*kind, entries), offset


def _bytes_of(tensor: torch.Tensor) -> bytes:
    """The tensor's values in C order, as bytes."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    try:
        return tensor.numpy().tobytes()  # numpy copies any strides into C order
    except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16), conj/neg views
        flat = tensor.resolve_conj().resolve_neg().contiguous().reshape(-1)
        return flat.view(torch.uint8).numpy().tobytes()


def pack(obj):
    """``obj`` packed in one buffer (a ``Packed``), or ``obj`` itself if it cannot be."""
    leaves: list = []
    layout, size = _plan(obj, leaves, 0)
    if layout is None:
        return obj
    parts = []
    for tensor, _offset, nbytes in leaves:
        if nbytes:
            parts.append(_bytes_of(tensor))
        pad = -nbytes % _ALIGN
        if pad:
            parts.append(bytes(pad))
    data = b"".join(parts)
    return Packed(layout, data if size < _BYTES_BELOW else np.frombuffer(data, dtype=np.uint8))


# numpy's dtypes for those it has (unpacking through numpy is the cheapest)
_NUMPY = {name: np.dtype(name if name != "bool" else np.bool_) for name in _DTYPES
          if name != "bfloat16"}  # fmt: skip


def _build(layout, array: np.ndarray):
    entries = layout[-1]
    out = {}
    for key, spec in entries:
        if spec[0] == "t":
            _, name, shape, offset, nbytes = spec
            part = array[offset : offset + nbytes]
            kind = _NUMPY.get(name)
            if kind is not None:
                out[key] = torch.from_numpy(part.view(kind).reshape(shape))
            else:
                out[key] = torch.from_numpy(part).view(_DTYPES[name]).view(shape)
        else:
            out[key] = _build(spec, array)
    if layout[0] == "dict":
        return out
    return _td.new(out, batch_size=torch.Size(layout[1]), device=layout[2])


def _seal(obj) -> bytes:
    """``obj`` (holding ``Packed`` objects on ``bytes``) pickled in one ``bytes`` object."""
    return _SEAL + pickle.dumps(obj, protocol=5)


def _unseal(obj):
    """What ``_seal`` sealed in ``obj``, or ``obj`` itself if it is not a sealed message."""
    if type(obj) is bytes and obj.startswith(_SEAL):
        return pickle.loads(memoryview(obj)[len(_SEAL) :])
    return obj


def _small(packed) -> bool:
    return type(packed) is Packed and type(packed.buffer) is bytes


def unpack(obj):
    """The TensorDict or dict packed in ``obj`` (on its own writable copy of the
    buffer); ``obj`` itself if it is not a ``Packed`` or a sealed one."""
    obj = _unseal(obj)
    if type(obj) is not Packed:
        return obj
    return _build(obj.layout, np.frombuffer(obj.buffer, dtype=np.uint8).copy())


def pack_into(obj, reserve):
    """Pack ``obj`` straight into a buffer instead of new bytes (the shared-memory channel,
    ``channel.py``): ``reserve(nbytes)`` returns a writable 1-D ``uint8`` numpy array of at
    least ``nbytes``. Returns ``(layout, nbytes)``, or ``(None, 0)`` if ``obj`` cannot be
    packed (then nothing is written).

    Example:
        >>> target = np.zeros(64, dtype=np.uint8)
        >>> layout, nbytes = pack_into({"w": torch.ones(2, 2)}, lambda n: target)
        >>> unpack_from(layout, target, nbytes)["w"].sum().item()
        4.0
    """
    leaves: list = []
    layout, size = _plan(obj, leaves, 0)
    if layout is None:
        return None, 0
    target = reserve(size)
    for tensor, offset, nbytes in leaves:
        if nbytes:
            _write(tensor, target[offset : offset + nbytes])
    return layout, size


def _write(tensor: torch.Tensor, out: np.ndarray) -> None:
    """Copy ``tensor``'s values (any strides) into the ``uint8`` array ``out``, C order."""
    if tensor.requires_grad:
        tensor = tensor.detach()
    try:
        src = tensor.numpy()
    except (TypeError, RuntimeError):  # a dtype numpy lacks (bfloat16), conj/neg views
        flat = tensor.resolve_conj().resolve_neg().contiguous().reshape(-1)
        out[:] = flat.view(torch.uint8).numpy()
        return
    out.view(src.dtype).reshape(src.shape)[...] = src


def unpack_from(layout, buffer: np.ndarray, nbytes: int):
    """What ``pack_into`` wrote in ``buffer`` (``layout``, ``nbytes``), rebuilt on its own
    copy of those bytes (the buffer may be overwritten afterwards)."""
    return _build(layout, np.array(buffer[:nbytes], copy=True))


def packed_message(message) -> Packed | None:
    """The ``Packed`` weights inside a ``weights_message`` (sealed bytes, or the ObjectRef
    of a ``Packed``, fetched here), or None if they travel unpacked."""
    if type(message) is not bytes and type(message) is not Packed:
        import ray

        if isinstance(message, ray.ObjectRef):
            message = ray.get(message)
    message = _unseal(message)
    return message if type(message) is Packed else None


def weights_message(weights):
    """What to send the workers for one weights version (see the module docstring)."""
    packed = pack(weights)
    if _small(packed) and packed.nbytes < INLINE_BYTES:
        return _seal(packed)
    import ray

    return ray.put(packed)


def result_message(batch, meta: dict):
    """A collection worker's ``(batch, meta)`` ready for the trip back (``open_result``
    on the driver gives them back)."""
    packed = pack(batch)
    return _seal((packed, meta)) if _small(packed) else (packed, meta)


def open_result(message) -> tuple:
    """``(batch, meta)`` from what ``result_message`` made (or a plain ``(batch, meta)``)."""
    batch, meta = _unseal(message)
    return unpack(batch), meta
