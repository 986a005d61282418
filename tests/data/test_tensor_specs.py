"""Tests of the tensor specs: every leaf spec, Composite and the seed-era aliases."""

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from torchrl_lite.data import tensor_specs as ts
from torchrl_lite.data.tensor_specs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

# name -> factory of a leaf spec with at least one dim (shape-mismatch tests need one)
LEAF_SPECS = {
    "unbounded": lambda: Unbounded((3,)),
    "unbounded_int": lambda: Unbounded((2,), dtype=torch.int64),
    "bounded": lambda: Bounded(-1.0, 2.0, (3,)),
    "bounded_per_element": lambda: Bounded(
        torch.tensor([-1.0, 0.0, 5.0]), torch.tensor([0.0, 1.0, 10.0])
    ),
    "bounded_uint8": lambda: Bounded(0, 255, (2, 2), dtype=torch.uint8),
    "categorical": lambda: Categorical(5, (1,)),
    "categorical_bool": lambda: Categorical(2, (1,), dtype=torch.bool),
    "one_hot": lambda: OneHot(4),
    "multi_categorical": lambda: MultiCategorical([2, 3, 4]),
    "multi_one_hot": lambda: MultiOneHot([2, 3]),
    "binary": lambda: Binary(5),
}

leaf_spec = pytest.mark.parametrize("make", list(LEAF_SPECS.values()), ids=list(LEAF_SPECS))


def _other_dtype(dtype):
    return torch.float64 if dtype != torch.float64 else torch.float32


def _wider(value: torch.Tensor) -> torch.Tensor:
    """A value whose last dim is one longer than the spec's."""
    return torch.cat([value, value[..., :1]], -1)


# -- shared behaviour of every leaf spec -------------------------------------------------


@leaf_spec
def test_spec_rand_and_zero_shape_dtype_device(make):
    spec = make()
    for value in (spec.rand(), spec.zero()):
        assert value.shape == spec.shape
        assert value.dtype == spec.dtype
        assert value.device == spec.device == torch.device("cpu")
    batch = spec.rand((7, 2))
    assert batch.shape == torch.Size([7, 2, *spec.shape])
    assert spec.zero(5).shape == torch.Size([5, *spec.shape])


@leaf_spec
def test_spec_rand_is_in(make):
    spec = make()
    assert spec.is_in(spec.rand())
    assert spec.is_in(spec.rand((100,)))
    spec.assert_is_in(spec.rand((3, 4)))


@leaf_spec
def test_spec_is_in_rejects_wrong_dtype(make):
    spec = make()
    value = spec.rand().to(_other_dtype(spec.dtype))
    assert not spec.is_in(value)
    with pytest.raises(ValueError, match="dtype"):
        spec.assert_is_in(value)


@leaf_spec
def test_spec_is_in_rejects_wrong_shape(make):
    spec = make()
    assert not spec.is_in(_wider(spec.rand()))
    assert not spec.is_in(spec.rand()[..., :0])


@leaf_spec
def test_spec_is_in_rejects_non_tensor(make):
    spec = make()
    assert not spec.is_in(spec.rand().numpy())
    with pytest.raises(ValueError, match="torch.Tensor"):
        spec.assert_is_in([0, 1])


@leaf_spec
def test_spec_project_is_noop_inside(make):
    spec = make()
    value = spec.rand((10,))
    projected = spec.project(value)
    assert projected.dtype == spec.dtype
    assert torch.equal(projected, value)


@leaf_spec
def test_spec_encode_numpy_roundtrip(make):
    spec = make()
    value = spec.rand()
    encoded = spec.encode(value.numpy())
    assert encoded.dtype == spec.dtype and encoded.shape == spec.shape
    assert torch.equal(encoded, value)
    assert torch.equal(spec.encode(value.tolist()), value)


@leaf_spec
def test_spec_expand_prepends_batch_dims(make):
    spec = make()
    expanded = spec.expand(4, 2, *spec.shape)
    assert expanded.shape == torch.Size([4, 2, *spec.shape])
    assert type(expanded) is type(spec) and expanded.dtype == spec.dtype
    assert expanded.is_in(expanded.rand())
    assert expanded.rand().shape == expanded.shape
    assert spec.expand(torch.Size([3, *spec.shape])) == spec.expand((3, *spec.shape))
    assert spec.expand(*spec.shape) == spec


@leaf_spec
def test_spec_expand_incompatible_shape_raises(make):
    spec = make()
    with pytest.raises(ValueError, match="Cannot expand"):
        spec.expand(4, *spec.shape[:-1], spec.shape[-1] + 1)
    with pytest.raises(ValueError, match="Cannot expand"):
        spec.expand(*spec.shape[1:])


@leaf_spec
def test_spec_unsqueeze_squeeze_roundtrip(make):
    spec = make()
    unsqueezed = spec.unsqueeze(0)
    assert unsqueezed.shape == torch.Size([1, *spec.shape])
    assert unsqueezed.is_in(unsqueezed.rand())
    assert unsqueezed.squeeze(0) == spec
    assert unsqueezed.squeeze() == spec.squeeze()
    assert spec.unsqueeze(-len(spec.shape) - 1) == unsqueezed


@leaf_spec
def test_spec_equality_clone_and_to(make):
    spec = make()
    assert spec == make()
    assert not (spec != make())
    clone = spec.clone()
    assert clone == spec and clone is not spec
    assert spec.to("cpu") == spec
    assert spec.to(torch.device("cpu")).device == torch.device("cpu")
    assert spec != spec.expand(2, *spec.shape)
    assert spec != Unbounded((9,)) and spec != "spec"


@leaf_spec
def test_spec_assert_is_in_message_names_key_spec_and_value(make):
    spec = make()
    value = _wider(spec.rand())
    with pytest.raises(ValueError) as info:
        spec.assert_is_in(value, key="action")
    message = str(info.value)
    assert "'action'" in message
    assert type(spec).__name__ in message and str(list(spec.shape)) in message
    assert str(list(value.shape)) in message


# -- Unbounded -------------------------------------------------------------------------


def test_unbounded_defaults_and_rand_statistics():
    spec = Unbounded()
    assert spec.shape == torch.Size([]) and spec.dtype == torch.float32
    samples = Unbounded((2,)).rand((5000,))
    assert samples.mean().abs() < 0.1 and 0.8 < samples.std() < 1.2


def test_unbounded_accepts_any_value():
    spec = Unbounded((2,))
    assert spec.is_in(torch.tensor([1e30, -1e30]))
    assert spec.project(torch.tensor([5.0, -7.0])).tolist() == [5.0, -7.0]


def test_unbounded_integer_and_bool_dtypes():
    for dtype in (torch.int64, torch.int32, torch.uint8, torch.bool):
        spec = Unbounded((3,), dtype=dtype)
        assert spec.rand().dtype == dtype and spec.is_in(spec.rand((10,)))


def test_unbounded_encode_numpy_and_python():
    spec = Unbounded((3,))
    out = spec.encode(np.array([1.0, 2.0, 3.0], dtype=np.float64))
    assert out.dtype == torch.float32 and out.tolist() == [1.0, 2.0, 3.0]
    reward = Unbounded((1,)).encode(0.5)
    assert reward.shape == torch.Size([1]) and reward.dtype == torch.float32
    assert Unbounded((3, 1)).encode([1, 2, 3]).shape == torch.Size([3, 1])
    assert spec.encode(np.zeros((4, 3))).shape == torch.Size([4, 3])  # leading batch dims kept


def test_unbounded_encode_wrong_shape_raises():
    with pytest.raises(ValueError, match="Cannot encode"):
        Unbounded((3, 2)).encode(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="Cannot encode"):
        Unbounded((3,)).encode([1.0, 2.0])


# -- Bounded ---------------------------------------------------------------------------


def test_bounded_shape_from_bounds_and_attributes():
    spec = Bounded(torch.zeros(2, 3), 1.0)
    assert spec.shape == torch.Size([2, 3])
    assert spec.low.shape == spec.high.shape == spec.shape
    assert spec.dtype == torch.float32
    assert Bounded(-1, 1, 2).shape == torch.Size([2])


def test_bounded_is_in_checks_range():
    spec = Bounded(-1.0, 2.0, (3,))
    assert spec.is_in(torch.tensor([-1.0, 0.0, 2.0]))  # bounds are inclusive
    assert not spec.is_in(torch.tensor([-1.0, 0.0, 2.01]))
    assert not spec.is_in(torch.tensor([-1.5, 0.0, 0.0]))


def test_bounded_is_in_per_element_bounds():
    spec = Bounded(torch.tensor([0.0, 10.0]), torch.tensor([1.0, 11.0]))
    assert spec.is_in(torch.tensor([0.5, 10.5]))
    assert not spec.is_in(torch.tensor([10.5, 0.5]))
    assert spec.is_in(torch.tensor([[0.5, 10.5], [1.0, 11.0]]))
    assert not spec.is_in(torch.tensor([[0.5, 10.5], [1.0, 12.0]]))


def test_bounded_rand_within_bounds_and_uniform():
    low, high = torch.tensor([-1.0, 0.0, 5.0]), torch.tensor([0.0, 1.0, 10.0])
    spec = Bounded(low, high)
    samples = spec.rand((10_000,))
    assert bool(((samples >= low) & (samples <= high)).all())
    torch.testing.assert_close(samples.mean(0), (low + high) / 2, atol=0.1, rtol=0)
    assert bool((samples.min(0).values < low + 0.01 * (high - low)).all())
    assert bool((samples.max(0).values > high - 0.01 * (high - low)).all())


def test_bounded_integer_rand_covers_every_value():
    spec = Bounded(-2, 2, (1,), dtype=torch.int64)
    samples = spec.rand((1000,))
    assert samples.dtype == torch.int64
    assert set(samples.flatten().tolist()) == {-2, -1, 0, 1, 2}
    pixels = Bounded(0, 255, (8, 8, 3), dtype=torch.uint8).rand((100,))
    assert pixels.min() == 0 and pixels.max() == 255


def test_bounded_rand_with_huge_or_infinite_bounds():
    big = torch.finfo(torch.float32).max
    for low, high in [(-big, big), (-float("inf"), float("inf")), (0.0, float("inf"))]:
        spec = Bounded(low, high, (4,))
        samples = spec.rand((100,))
        assert bool(torch.isfinite(samples).all()) and spec.is_in(samples)


def test_bounded_project_clamps_per_element():
    spec = Bounded(torch.tensor([-1.0, 0.0]), torch.tensor([1.0, 5.0]))
    out = spec.project(torch.tensor([[3.0, -2.0], [-4.0, 9.0], [0.5, 2.0]]))
    assert out.tolist() == [[1.0, 0.0], [-1.0, 5.0], [0.5, 2.0]]
    assert spec.is_in(out)


def test_bounded_project_rounds_for_integer_dtype():
    spec = Bounded(0, 10, (3,), dtype=torch.int64)
    out = spec.project(torch.tensor([2.6, -3.0, 12.2]))
    assert out.dtype == torch.int64 and out.tolist() == [3, 0, 10]


def test_bounded_invalid_bounds_raise():
    with pytest.raises(ValueError, match="low must be <= high"):
        Bounded(1.0, -1.0, (2,))
    with pytest.raises(ValueError, match="do not fit"):
        Bounded(torch.zeros(3), torch.ones(3), (2,))


def test_bounded_equality_depends_on_bounds():
    assert Bounded(-1.0, 1.0, (2,)) == Bounded(torch.tensor([-1.0, -1.0]), 1.0)
    assert Bounded(-1.0, 1.0, (2,)) != Bounded(-1.0, 2.0, (2,))
    assert Bounded(-1.0, 1.0, (2,)) != Bounded(-1.0, 1.0, (2,), dtype=torch.float64)
    assert Bounded(-1.0, 1.0, (2,)) != Bounded(-1.0, 1.0, (3,))


def test_bounded_expand_bounds_follow():
    spec = Bounded(torch.tensor([0.0, 10.0]), torch.tensor([1.0, 11.0]))
    expanded = spec.expand(3, 2)
    assert expanded.low.shape == torch.Size([3, 2])
    assert expanded.low.tolist() == [[0.0, 10.0]] * 3
    assert expanded.high.tolist() == [[1.0, 11.0]] * 3
    assert expanded.is_in(expanded.rand())


def test_bounded_squeeze_unsqueeze_bounds_follow():
    spec = Bounded(torch.tensor([[0.0, 10.0, 20.0]]), torch.tensor([[1.0, 11.0, 21.0]]))
    squeezed = spec.squeeze()
    assert squeezed.shape == torch.Size([3]) and squeezed.low.tolist() == [0.0, 10.0, 20.0]
    column = squeezed.unsqueeze(-1)
    assert column.shape == torch.Size([3, 1]) and column.high.tolist() == [[1.0], [11.0], [21.0]]
    assert spec.squeeze(1) == spec  # not a dim of size 1: unchanged
    with pytest.raises(IndexError):
        spec.squeeze(2)


def test_bounded_is_in_rollout_with_inserted_time_dim():
    """A batch-4 action spec [4, 1] accepts [4, T, 1] and [T, 4, 1], bounds per env."""
    low = torch.tensor([[0.0], [10.0], [20.0], [30.0]])
    spec = Bounded(low, low + 1.0)
    per_env = (low + 0.5).unsqueeze(1).expand(4, 20, 1)  # [4, 20, 1]
    assert spec.is_in(per_env)
    assert spec.is_in(per_env.transpose(0, 1))  # [20, 4, 1]
    assert spec.is_in(spec.rand((20,)))
    bad = per_env.clone()
    bad[1, 7] = 0.5  # env 1 has bounds [10, 11]
    assert not spec.is_in(bad)
    assert not spec.is_in(bad.transpose(0, 1))
    assert not spec.is_in(torch.zeros(4, 20, 2))
    assert not spec.is_in(torch.full((3, 20, 1), 0.5))
    assert torch.equal(spec.project(bad)[1, 7], torch.tensor([10.0]))


def test_bounded_assert_is_in_names_out_of_range_values():
    spec = Bounded(-1.0, 1.0, (2,))
    with pytest.raises(ValueError, match="outside") as info:
        spec.assert_is_in(torch.tensor([0.0, 3.0]), key="action")
    message = str(info.value)
    assert "'action'" in message and "Bounded" in message and "3.0" in message
    with pytest.raises(ValueError, match="max=7.0"):
        spec.assert_is_in(torch.full((10, 2), 7.0))


# -- Categorical -----------------------------------------------------------------------


def test_categorical_defaults_and_is_in():
    spec = Categorical(4)
    assert spec.shape == torch.Size([]) and spec.dtype == torch.int64 and spec.n == 4
    assert spec.is_in(torch.tensor(3)) and spec.is_in(torch.tensor(0))
    assert not spec.is_in(torch.tensor(4)) and not spec.is_in(torch.tensor(-1))
    assert not spec.is_in(torch.tensor(1.0))
    assert spec.is_in(torch.tensor([0, 1, 2, 3]))  # leading batch dims


def test_categorical_rand_covers_every_category():
    samples = Categorical(6).rand((1000,))
    assert set(samples.tolist()) == set(range(6))


def test_categorical_batched_rollout_value():
    spec = Categorical(3, (4,))  # the action of 4 envs
    assert spec.is_in(torch.randint(0, 3, (4, 20)))
    assert spec.is_in(torch.randint(0, 3, (20, 4)))
    assert not spec.is_in(torch.full((4, 20), 3))


def test_categorical_project_and_encode():
    spec = Categorical(5)
    assert spec.project(torch.tensor([7, -2, 3])).tolist() == [4, 0, 3]
    out = spec.project(torch.tensor([2.6, 9.0]))
    assert out.dtype == torch.int64 and out.tolist() == [3, 4]
    assert spec.encode(3).dtype == torch.int64 and spec.encode(3).shape == torch.Size([])
    assert spec.encode(np.int32(2)).item() == 2
    assert Categorical(5, (1,)).encode(4).shape == torch.Size([1])


def test_categorical_bool_done_flags():
    spec = Categorical(2, (1,), dtype=torch.bool)
    assert spec.is_in(torch.tensor([True])) and spec.is_in(spec.zero())
    assert not spec.is_in(torch.tensor([1]))
    assert spec.project(torch.tensor([3])).tolist() == [True]
    assert set(spec.rand((200,)).flatten().tolist()) == {True, False}


def test_categorical_equality_depends_on_n():
    assert Categorical(3) == Categorical(3) and Categorical(3) != Categorical(4)
    assert Categorical(3).to_one_hot(torch.tensor(1)).tolist() == [0, 1, 0]


# -- OneHot ----------------------------------------------------------------------------


def test_one_hot_is_in():
    spec = OneHot(3)
    assert spec.shape == torch.Size([3]) and spec.dtype == torch.int64
    assert spec.is_in(torch.tensor([0, 1, 0]))
    assert not spec.is_in(torch.tensor([1, 1, 0]))
    assert not spec.is_in(torch.tensor([0, 0, 0]))
    assert not spec.is_in(torch.tensor([0, 2, -1]))
    assert not spec.is_in(spec.zero())  # all zeros is not a one-hot vector


def test_one_hot_rand_covers_every_category():
    samples = OneHot(5).rand((1000,))
    assert bool((samples.sum(-1) == 1).all())
    assert set(samples.argmax(-1).tolist()) == set(range(5))


def test_one_hot_encode_from_index():
    spec = OneHot(4)
    assert spec.encode(2).tolist() == [0, 0, 1, 0]
    assert spec.encode(np.int64(0)).dtype == torch.int64
    assert spec.encode([0, 1, 0, 0]).tolist() == [0, 1, 0, 0]  # already one-hot
    batched = spec.expand(3, 4)
    out = batched.encode(np.array([0, 3, 1]))
    assert out.shape == torch.Size([3, 4]) and out.argmax(-1).tolist() == [0, 3, 1]
    assert spec.encode(np.eye(4)[[1, 2]]).shape == torch.Size([2, 4])  # batch of one-hots
    with pytest.raises(ValueError, match="out of range"):
        spec.encode(4)


def test_one_hot_project_and_to_categorical():
    spec = OneHot(3)
    out = spec.project(torch.tensor([[0.1, 2.0, -1.0], [5.0, 0.0, 0.0]]))
    assert out.tolist() == [[0, 1, 0], [1, 0, 0]] and out.dtype == torch.int64
    assert spec.to_categorical(torch.tensor([[0, 0, 1]])).tolist() == [2]
    bool_spec = OneHot(3, dtype=torch.bool)
    assert bool_spec.is_in(bool_spec.rand((5,)))
    assert bool_spec.to_categorical(torch.tensor([False, True, False])).item() == 1


def test_one_hot_shape_must_end_with_n():
    with pytest.raises(ValueError, match="last dim"):
        OneHot(3, shape=(2, 4))
    assert OneHot(3) != OneHot(4)


# -- MultiCategorical ------------------------------------------------------------------


def test_multi_categorical_is_in_per_element():
    spec = MultiCategorical([2, 3])
    assert spec.shape == torch.Size([2]) and spec.dtype == torch.int64
    assert spec.is_in(torch.tensor([1, 2]))
    assert not spec.is_in(torch.tensor([2, 2]))
    assert not spec.is_in(torch.tensor([1, 3]))
    assert not spec.is_in(torch.tensor([-1, 0]))


def test_multi_categorical_rand_covers_every_category():
    samples = MultiCategorical([2, 3, 5]).rand((1000,))
    for i, n in enumerate([2, 3, 5]):
        assert set(samples[:, i].tolist()) == set(range(n))


def test_multi_categorical_project_clamps_per_element():
    spec = MultiCategorical([2, 3])
    assert spec.project(torch.tensor([[5, 5], [-1, 1]])).tolist() == [[1, 2], [0, 1]]


def test_multi_categorical_reshaping_keeps_nvec():
    spec = MultiCategorical([2, 3])
    assert spec.expand(4, 2).nvec.tolist() == [[2, 3]] * 4
    column = spec.unsqueeze(-1)
    assert column.shape == torch.Size([2, 1]) and column.nvec.tolist() == [[2], [3]]
    assert column.squeeze(-1) == spec
    assert spec != MultiCategorical([2, 4])
    assert MultiCategorical([[2, 3], [4, 5]]).shape == torch.Size([2, 2])


# -- MultiOneHot -----------------------------------------------------------------------


def test_multi_one_hot_is_in_each_chunk():
    spec = MultiOneHot([2, 3])
    assert spec.shape == torch.Size([5])
    assert spec.is_in(torch.tensor([0, 1, 0, 0, 1]))
    assert not spec.is_in(torch.tensor([1, 1, 0, 0, 1]))  # first chunk has two ones
    assert not spec.is_in(torch.tensor([0, 1, 0, 0, 0]))  # second chunk is empty
    assert not spec.is_in(torch.tensor([0, 1, 0, 1, 1]))


def test_multi_one_hot_rand_covers_every_category():
    spec = MultiOneHot([2, 3])
    categories = spec.to_categorical(spec.rand((1000,)))
    assert set(categories[:, 0].tolist()) == {0, 1}
    assert set(categories[:, 1].tolist()) == {0, 1, 2}


def test_multi_one_hot_encode_and_project():
    spec = MultiOneHot([2, 3])
    assert spec.encode([1, 2]).tolist() == [0, 1, 0, 0, 1]
    assert spec.encode(np.array([[0, 0], [1, 1]])).tolist() == [[1, 0, 1, 0, 0], [0, 1, 0, 1, 0]]
    with pytest.raises(ValueError, match="Cannot encode"):
        spec.encode([1, 2, 0])
    with pytest.raises(ValueError, match="out of range"):
        spec.encode([2, 0])
    out = spec.project(torch.tensor([0.2, 0.9, 3.0, -1.0, 2.0]))
    assert out.tolist() == [0, 1, 1, 0, 0]
    assert spec != MultiOneHot([3, 2])


# -- Binary ----------------------------------------------------------------------------


def test_binary_is_in_and_rand():
    spec = Binary(4)
    assert spec.shape == torch.Size([4]) and spec.dtype == torch.int8 and spec.n == 4
    assert spec.is_in(torch.tensor([0, 1, 1, 0], dtype=torch.int8))
    assert not spec.is_in(torch.tensor([0, 2, 1, 0], dtype=torch.int8))
    samples = spec.rand((2000,)).float()
    assert set(samples.flatten().tolist()) == {0.0, 1.0}
    assert abs(samples.mean().item() - 0.5) < 0.05


def test_binary_shape_project_and_errors():
    assert Binary(shape=(2, 3)).n == 3
    assert Binary(shape=(2, 3)).rand().shape == torch.Size([2, 3])
    out = Binary(3).project(torch.tensor([0.7, 0.2, -4.0]))
    assert out.dtype == torch.int8 and out.tolist() == [1, 0, 0]
    assert Binary(3).project(torch.tensor([5, 0, 1], dtype=torch.int8)).tolist() == [1, 0, 1]
    with pytest.raises(ValueError):
        Binary()
    with pytest.raises(ValueError):
        Binary(4, shape=(3,))
    assert Binary(3) != Binary(4)


# -- seed-era aliases ------------------------------------------------------------------


def test_aliases_build_the_same_specs():
    from torchrl_lite import data

    assert ts.UnboundedContinuousTensorSpec(shape=(3,)) == Unbounded((3,))
    assert ts.BoundedTensorSpec(-1.0, 1.0, (2,)) == Bounded(-1.0, 1.0, (2,))
    assert ts.DiscreteTensorSpec(4) == Categorical(4)
    assert ts.OneHotDiscreteTensorSpec(4) == OneHot(4)
    assert ts.MultiDiscreteTensorSpec([2, 3]) == MultiCategorical([2, 3])
    assert ts.MultiOneHotDiscreteTensorSpec([2, 3]) == MultiOneHot([2, 3])
    assert ts.BinaryDiscreteTensorSpec(3) == Binary(3)
    assert ts.CompositeSpec(a=Unbounded(())) == Composite(a=Unbounded(()))
    discrete = ts.UnboundedDiscreteTensorSpec((2,))
    assert isinstance(discrete, Unbounded) and discrete.dtype == torch.int64
    for name in ts.__all__:
        assert getattr(data, name) is getattr(ts, name)


# -- Composite -------------------------------------------------------------------------


def _env_spec(batch=()) -> Composite:
    batch = tuple(batch)
    spec = Composite(
        observation=Unbounded((*batch, 3)),
        action=Bounded(-2.0, 2.0, (*batch, 1)),
        shape=batch,
    )
    spec["next", "reward"] = Unbounded((*batch, 1))
    spec["next", "done"] = Categorical(2, (*batch, 1), dtype=torch.bool)
    return spec


def test_composite_nested_set_creates_sub_composites():
    spec = _env_spec((4,))
    assert isinstance(spec["next"], Composite) and spec["next"].shape == torch.Size([4])
    assert spec["next", "reward"] == Unbounded((4, 1))
    assert spec[("next",)] is spec["next"]
    assert spec["next"]["done"].dtype == torch.bool
    assert len(spec) == 3 and list(spec) == ["observation", "action", "next"]
    assert spec.set(("info", "x", "y"), Unbounded((4,))) is spec
    assert spec["info", "x", "y"].shape == torch.Size([4])
    nested = Composite({"a": {"b": Unbounded((2,))}})
    assert isinstance(nested["a"], Composite) and nested["a", "b"].shape == torch.Size([2])


def test_composite_keys_items_values():
    spec = _env_spec()
    assert spec.keys() == ["observation", "action", "next"]
    assert spec.keys(include_nested=True) == [
        "observation",
        "action",
        "next",
        ("next", "reward"),
        ("next", "done"),
    ]
    leaves = ["observation", "action", ("next", "reward"), ("next", "done")]
    assert spec.keys(include_nested=True, leaves_only=True) == leaves
    assert spec.keys(leaves_only=True) == ["observation", "action"]
    assert [k for k, _ in spec.items(True, True)] == leaves
    assert spec.items(True, True)[2][1] is spec["next", "reward"]
    assert spec.values(True, True)[0] is spec["observation"]


def test_composite_missing_key_names_key_and_closest_match():
    spec = _env_spec()
    with pytest.raises(KeyError, match="observaton") as info:
        spec["observaton"]
    assert "Did you mean 'observation'" in str(info.value)
    with pytest.raises(KeyError) as info:
        spec["next", "rewrd"]
    assert "('next', 'rewrd')" in str(info.value)
    assert "Did you mean ('next', 'reward')" in str(info.value)
    with pytest.raises(KeyError):
        spec["observation", "x"]  # a leaf has no entries


def test_composite_contains_get_del_pop():
    spec = _env_spec()
    assert "observation" in spec and ("next", "reward") in spec and "next" in spec
    assert ("next", "nope") not in spec and ("observation", "x") not in spec
    assert "reward" not in spec
    assert spec.get("nope") is None and spec.get(("next", "done")) is spec["next", "done"]
    del spec["next", "reward"]
    assert ("next", "reward") not in spec and ("next", "done") in spec
    with pytest.raises(KeyError, match="reward"):
        del spec["next", "reward"]
    action = spec["action"]
    assert spec.pop("action") is action and "action" not in spec
    assert spec.pop("action", None) is None
    with pytest.raises(KeyError, match="action"):
        spec.pop("action")


def test_composite_set_errors():
    spec = _env_spec((4,))
    with pytest.raises(ValueError, match="batch shape"):
        spec["bad"] = Unbounded((3,))
    with pytest.raises(ValueError, match="batch shape"):
        spec["next", "bad"] = Unbounded((5, 1))
    with pytest.raises(ValueError, match="batch shape"):
        Composite(obs=Unbounded((3,)), shape=(4,))
    with pytest.raises(KeyError, match="leaf"):
        spec["observation", "x"] = Unbounded((4,))
    with pytest.raises(TypeError, match="must be a spec"):
        spec["x"] = torch.zeros(4)
    with pytest.raises(TypeError, match="strings"):
        spec[0] = Unbounded((4,))
    assert "bad" not in spec and ("next", "bad") not in spec


def test_composite_rand_and_zero_return_tensordicts():
    spec = _env_spec((4,))
    for td in (spec.rand(), spec.zero()):
        assert isinstance(td, TensorDict) and td.batch_size == torch.Size([4])
        assert td["observation"].shape == torch.Size([4, 3])
        assert td["next"].batch_size == torch.Size([4])
        assert td["next", "done"].dtype == torch.bool
        assert spec.is_in(td)
        spec.assert_is_in(td)
    td = spec.rand((5,))
    assert td.batch_size == torch.Size([5, 4]) and td["next", "reward"].shape == torch.Size(
        [5, 4, 1]
    )
    assert spec.is_in(td)


def test_composite_is_in_and_assert_is_in_errors():
    spec = _env_spec((4,))
    td = spec.rand()
    td["action"] = torch.full((4, 1), 3.0)
    assert not spec.is_in(td)
    with pytest.raises(ValueError) as info:
        spec.assert_is_in(td)
    message = str(info.value)
    assert "'action'" in message and "Bounded" in message and "3.0" in message
    td = spec.rand()
    del td["next", "reward"]
    assert not spec.is_in(td)
    with pytest.raises(KeyError, match="reward") as info:
        spec.assert_is_in(td)
    assert "Available keys" in str(info.value)
    with pytest.raises(TypeError):
        spec.assert_is_in({"observation": torch.zeros(4, 3)})


def test_composite_is_in_rollout_batch():
    spec = _env_spec((4,))
    rollout = torch.stack([spec.rand() for _ in range(20)], dim=1)  # [4, 20]
    assert rollout.batch_size == torch.Size([4, 20])
    assert spec.is_in(rollout)


def test_composite_expand_prepends_batch_to_every_entry():
    spec = _env_spec()
    expanded = spec.expand(3)
    assert expanded.shape == torch.Size([3])
    assert expanded["observation"].shape == torch.Size([3, 3])
    assert expanded["next"].shape == torch.Size([3])
    assert expanded["next", "done"].shape == torch.Size([3, 1])
    assert expanded["action"].low.shape == torch.Size([3, 1])
    assert expanded.rand().batch_size == torch.Size([3])
    assert _env_spec((4,)).expand(2, 4) == _env_spec((2, 4))
    assert _env_spec((4,)).expand((2, 4)) == _env_spec((2, 4))
    with pytest.raises(ValueError, match="Cannot expand"):
        _env_spec((4,)).expand(5)


def test_composite_squeeze_unsqueeze():
    spec = _env_spec((4,))
    unsqueezed = spec.unsqueeze(0)
    assert unsqueezed.shape == torch.Size([1, 4])
    assert unsqueezed["next", "reward"].shape == torch.Size([1, 4, 1])
    assert unsqueezed.squeeze(0) == spec and unsqueezed.squeeze() == spec
    assert spec.unsqueeze(-1)["observation"].shape == torch.Size([4, 1, 3])
    assert spec.squeeze(0) == spec


def test_composite_to_clone_and_equality():
    spec = _env_spec((4,))
    assert spec == _env_spec((4,))
    moved = spec.to("cpu")
    assert moved == spec and moved.device == torch.device("cpu")
    assert moved["next", "reward"].device == torch.device("cpu")
    clone = spec.clone()
    assert clone == spec and clone["next"] is not spec["next"]
    clone["next", "extra"] = Unbounded((4,))
    assert ("next", "extra") not in spec and clone != spec
    other = _env_spec((4,))
    other["action"] = Bounded(-1.0, 1.0, (4, 1))
    assert other != spec
    assert _env_spec((4,)) != _env_spec((5,)) and spec != "spec"


def test_composite_project_encode_update():
    spec = _env_spec()
    td = spec.zero()
    td["action"] = torch.tensor([5.0])
    assert spec.project(td)["action"].tolist() == [2.0]
    encoded = spec.encode({"observation": np.ones(3), "next": {"reward": 1.5}})
    assert encoded["observation"].dtype == torch.float32
    assert encoded["next", "reward"].tolist() == [1.5]
    spec.update(Composite(extra=Unbounded(())))
    assert "extra" in spec and not spec.is_empty() and Composite().is_empty()


def test_composite_none_entries_are_skipped():
    spec = Composite(observation=Unbounded((2,)), placeholder=None)
    assert "placeholder" in spec and spec["placeholder"] is None
    assert "placeholder" not in spec.rand().keys()
    assert spec.is_in(spec.rand())
    assert spec.expand(3)["placeholder"] is None


def test_composite_repr_lists_entries():
    text = repr(_env_spec((4,)))
    assert text.startswith("Composite(") and "observation: Unbounded" in text
    assert "reward: Unbounded" in text and "shape=[4]" in text
