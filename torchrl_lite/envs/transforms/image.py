"""Image transforms: ToTensorImage, Resize, CenterCrop, GrayScale.

Images after ``ToTensorImage`` are float ``[..., C, H, W]``; the others expect that layout.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from torchrl_lite import _keys as K
from torchrl_lite.envs.transforms.transforms import Transform, _norm_keys

__all__ = ["ToTensorImage", "Resize", "CenterCrop", "GrayScale"]

_IMAGE_KEYS = [K.PIXELS]


def _check_image_specs(transform, specs, min_dims: int = 3) -> None:
    for key in transform.in_keys:
        found = specs.find(key)
        shape = found[1].shape[len(specs.batch_size) :]
        if len(shape) < min_dims:
            raise ValueError(
                f"{type(transform).__name__}: {key!r} has shape {list(shape)}; an image needs at least {min_dims} dims ([..., C, H, W] or [..., H, W, C])."
            )


class ToTensorImage(Transform):
    """uint8 images ``[..., H, W, C]`` in ``[0, 255]`` to float ``[..., C, H, W]`` in ``[0, 1]``.

    Args:
        from_int: divide by 255; default: when the input has an integer dtype.
        unsqueeze: add a leading dim to an unbatched ``[C, H, W]`` output.
        dtype: the output dtype (default ``torch.float32``).
        in_keys: the image entries (default ``["pixels"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> t = ToTensorImage()
        >>> td = TensorDict({"pixels": torch.full((4, 5, 3), 255, dtype=torch.uint8)}, [])
        >>> out = t(td)["pixels"]
        >>> out.shape, out.dtype, out.max().item()
        (torch.Size([3, 4, 5]), torch.float32, 1.0)
    """

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.dtype | None = None,
        in_keys=None,
        out_keys=None,
    ):
        super().__init__(in_keys=_IMAGE_KEYS if in_keys is None else in_keys, out_keys=out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = torch.float32 if dtype is None else dtype

    def _apply_transform(self, x):
        from_int = not x.dtype.is_floating_point
        scale = from_int if self.from_int is None else self.from_int
        x = x.movedim(-1, -3).to(
            self.dtype, memory_format=torch.contiguous_format
        )  # [..., C, H, W]
        if scale:
            x = x.div_(255) if from_int else x.div(255)  # in place only on the fresh copy
        if self.unsqueeze and x.dim() == 3:
            x = x.unsqueeze(0)
        return x

    def _attach(self, specs):
        super()._attach(specs)
        _check_image_specs(self, specs)


class Resize(Transform):
    """Resize images ``[..., C, H, W]`` to ``[..., C, w, h]`` (TorchRL's argument order).

    Args:
        w: the output size of dim -2.
        h: the output size of dim -1 (default ``w``).
        interpolation: a ``torch.nn.functional.interpolate`` mode (default ``"bilinear"``).
        in_keys: the image entries (default ``["pixels"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> Resize(2, 2)(TensorDict({"pixels": torch.ones(3, 8, 8)}, []))["pixels"].shape
        torch.Size([3, 2, 2])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys=None,
        out_keys=None,
    ):
        super().__init__(in_keys=_IMAGE_KEYS if in_keys is None else in_keys, out_keys=out_keys)
        h = w if h is None else h
        for name, v in (("w", w), ("h", h)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"Resize: {name} must be a positive int, got {v!r}")
        self.w, self.h = int(w), int(h)
        self.interpolation = interpolation

    def _apply_transform(self, x):
        lead = x.shape[:-3]
        flat = x.reshape(-1, *x.shape[-3:])  # [N, C, H, W]
        dtype = x.dtype
        if not dtype.is_floating_point:
            flat = flat.float()
        out = F.interpolate(flat, size=[self.w, self.h], mode=self.interpolation)
        if not dtype.is_floating_point:
            out = out.round().clamp(torch.iinfo(dtype).min, torch.iinfo(dtype).max).to(dtype)
        return out.reshape(*lead, *out.shape[-3:])

    def _attach(self, specs):
        super()._attach(specs)
        _check_image_specs(self, specs)

    def extra_repr(self):
        return (
            f"w={self.w}, h={self.h}, interpolation={self.interpolation!r}, " + super().extra_repr()
        )


class CenterCrop(Transform):
    """Crop the centre ``w x h`` of images ``[..., C, H, W]`` (rows ``w``, columns ``h``).

    Args:
        w: the output size of dim -2.
        h: the output size of dim -1 (default ``w``).
        in_keys: the image entries (default ``["pixels"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> x = torch.arange(16.0).reshape(1, 4, 4)
        >>> CenterCrop(2)(TensorDict({"pixels": x}, []))["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(self, w: int, h: int | None = None, in_keys=None, out_keys=None):
        super().__init__(in_keys=_IMAGE_KEYS if in_keys is None else in_keys, out_keys=out_keys)
        h = w if h is None else h
        for name, v in (("w", w), ("h", h)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"CenterCrop: {name} must be a positive int, got {v!r}")
        self.w, self.h = int(w), int(h)

    def _apply_transform(self, x):
        rows, cols = x.shape[-2], x.shape[-1]
        if rows < self.w or cols < self.h:
            raise ValueError(
                f"CenterCrop({self.w}, {self.h}) cannot crop an image of size {rows}x{cols}"
            )
        top = int(round((rows - self.w) / 2.0))
        left = int(round((cols - self.h) / 2.0))
        return x[..., top : top + self.w, left : left + self.h]

    def _attach(self, specs):
        super()._attach(specs)
        _check_image_specs(self, specs)
        for key in self.in_keys:
            shape = specs.find(key)[1].shape
            if shape[-2] < self.w or shape[-1] < self.h:
                raise ValueError(
                    f"CenterCrop({self.w}, {self.h}): {key!r} images are {shape[-2]}x{shape[-1]}, smaller than the crop."
                )

    def extra_repr(self):
        return f"w={self.w}, h={self.h}, " + super().extra_repr()


class GrayScale(Transform):
    """RGB images ``[..., 3, H, W]`` to grayscale ``[..., 1, H, W]`` (ITU-R 601-2 luma).

    Args:
        in_keys: the image entries (default ``["pixels"]``).
        out_keys: where to write them (default: in place).

    Example:
        >>> x = torch.ones(3, 2, 2)
        >>> GrayScale()(TensorDict({"pixels": x}, []))["pixels"].shape
        torch.Size([1, 2, 2])
    """

    def __init__(self, in_keys=None, out_keys=None):
        super().__init__(
            in_keys=_IMAGE_KEYS if in_keys is None else _norm_keys(in_keys), out_keys=out_keys
        )
        self._weights = torch.tensor([0.2989, 0.587, 0.114]).reshape(3, 1, 1)  # [3, 1, 1]

    def _on_apply(self, fn):
        self._weights = fn(self._weights)

    def _apply_transform(self, x):
        if x.shape[-3] != 3:
            raise ValueError(f"GrayScale expects 3 channels at dim -3, got shape {list(x.shape)}")
        dtype = x.dtype
        xf = x if dtype.is_floating_point else x.float()
        weights = self._weights.reshape(3).to(device=xf.device, dtype=xf.dtype)
        # one matrix product over the channels, laid out the way they are in memory:
        # 1.5x (channel planes) to 6x (a [H, W, 3] frame viewed as [3, H, W]) faster
        # than a broadcast multiply and sum
        hwc = xf.movedim(-3, -1)  # [..., H, W, 3]
        if hwc.is_contiguous():
            out = (hwc @ weights).unsqueeze(-3)  # [..., 1, H, W]
        else:
            out = (weights[None] @ xf.flatten(-2)).unflatten(-1, xf.shape[-2:])
        if not dtype.is_floating_point:
            out = out.round().clamp(0, torch.iinfo(dtype).max).to(dtype)
        return out

    def _attach(self, specs):
        super()._attach(specs)
        _check_image_specs(self, specs)
        for key in self.in_keys:
            shape = specs.find(key)[1].shape
            if shape[-3] != 3:
                raise ValueError(
                    f"GrayScale: {key!r} has shape {list(shape)}; expected 3 channels at dim -3 ([..., 3, H, W]: apply ToTensorImage first)."
                )
