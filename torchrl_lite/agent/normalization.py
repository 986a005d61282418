"""Seed 000's import path of the running normalizers (a face: they live in
:mod:`torchrl_lite.modules.models.normalization`, below the recipes that use them too)."""

from torchrl_lite.modules.models.normalization import ReturnNormalizer, RunningNorm

__all__ = ["ReturnNormalizer", "RunningNorm"]
