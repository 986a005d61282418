"""RandomShift / RandomCrop against a plain per-image loop (F.pad replicate + slicing)."""

import pytest
import torch
import torch.nn.functional as F
from tensordict import TensorDict

from torchrl_lite.envs import CenterCrop, RandomCrop, RandomShift, TransformedEnv
from torchrl_lite.envs.transforms.augment import crop_images


def _draws(seed, n, high):
    """The offsets the transform draws with a generator seeded ``seed``: top, then left."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, high + 1, (n,), generator=g), torch.randint(
        0, high + 1, (n,), generator=g
    )


def _loop_shift(x, pad, tops, lefts):
    out = torch.empty_like(x)
    for i in range(x.shape[0]):  # the reference: one image at a time, DrQ's way
        padded = F.pad(x[i : i + 1].float(), (pad, pad, pad, pad), mode="replicate")[0]
        t, lft = int(tops[i]), int(lefts[i])
        out[i] = padded[:, t : t + x.shape[-2], lft : lft + x.shape[-1]].to(x.dtype)
    return out


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_random_shift_matches_a_per_image_pad_and_crop_loop(dtype):
    x = (torch.rand(6, 3, 10, 12) * 255).to(dtype)
    shift = RandomShift(pad=3, in_keys=["pixels"], generator=torch.Generator().manual_seed(7))
    got = shift(TensorDict({"pixels": x.clone()}, [6]))["pixels"]
    tops, lefts = _draws(7, 6, 6)
    assert got.dtype == dtype
    assert torch.equal(got, _loop_shift(x, 3, tops, lefts))
    assert not all(torch.equal(got[i], x[i]) for i in range(6))  # some images moved


def test_random_crop_matches_a_per_image_slicing_loop_over_extra_batch_dims():
    x = torch.rand(2, 3, 4, 9, 9)  # [B, T, C, H, W]
    crop = RandomCrop(5, 6, in_keys=["pixels"], generator=torch.Generator().manual_seed(1))
    got = crop(TensorDict({"pixels": x}, [2, 3]))["pixels"]
    g = torch.Generator().manual_seed(1)
    tops = torch.randint(0, 5, (2, 3), generator=g)
    lefts = torch.randint(0, 4, (2, 3), generator=g)
    assert got.shape == (2, 3, 4, 5, 6)
    for b in range(2):
        for t in range(3):
            top, left = int(tops[b, t]), int(lefts[b, t])
            assert torch.equal(got[b, t], x[b, t, :, top : top + 5, left : left + 6])


def test_crop_images_with_zero_offsets_and_center_crop_for_evaluation():
    x = torch.rand(4, 2, 8, 8)
    zero = torch.zeros(4, dtype=torch.long)
    assert torch.equal(crop_images(x, zero, zero, 8, 8), x)
    centre = CenterCrop(6)(TensorDict({"pixels": x}, [4]))["pixels"]
    one = torch.ones(4, dtype=torch.long)
    assert torch.equal(crop_images(x, one, one, 6, 6), centre)
    assert torch.equal(RandomShift(pad=0)(TensorDict({"pixels": x}, [4]))["pixels"], x)


def test_random_shift_on_a_sample_shifts_pixels_and_next_pixels_independently():
    x = torch.rand(64, 1, 8, 8)
    keys = ["pixels", ("next", "pixels")]
    td = TensorDict({"pixels": x.clone(), "next": {"pixels": x.clone()}}, [64])
    out = RandomShift(pad=2, in_keys=keys)(td)
    assert not torch.equal(out["pixels"], out["next", "pixels"])


def test_random_shift_pad_larger_than_the_image_is_an_error_naming_both():
    td = TensorDict({"pixels": torch.rand(2, 3, 4, 6)}, [2])
    with pytest.raises(ValueError, match=r"pad=5 .*\(4x6\)"):
        RandomShift(pad=5)(td)
    with pytest.raises(ValueError, match=r"RandomCrop\(7, 7\) is larger .*\(4x6\)"):
        RandomCrop(7)(td)
    with pytest.raises(ValueError, match="pad must be an int >= 0, got -1"):
        RandomShift(pad=-1)


def test_random_shift_on_env_outputs_keeps_the_spec():
    from torchrl_lite.recipes.common import PIXELS_STACK, make_env

    env = make_env("CartPole-v1", num_envs=2, seed=0, pixels=True)
    env = TransformedEnv(env, RandomShift(pad=4, in_keys=[PIXELS_STACK]))
    td = env.rollout(3)
    spec = env.observation_spec[PIXELS_STACK]
    assert spec.is_in(td[PIXELS_STACK][:, 0]) and td[PIXELS_STACK].dtype == torch.uint8
    with pytest.raises(ValueError, match="pad=64 is not smaller"):
        TransformedEnv(make_env("CartPole-v1", pixels=True), RandomShift(64, [PIXELS_STACK]))
    env.close()
