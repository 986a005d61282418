"""Stacked specs (``torch.stack(specs, 0)``): the specs of copies that differ."""

import pytest
import torch
from tensordict import LazyStackedTensorDict

from torchrl_lite.data import (
    Bounded,
    Categorical,
    Composite,
    LazyStackedCompositeSpec,
    LazyStackedTensorSpec,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
)


def two_tasks():
    a = Composite(obs=Unbounded((3,)), action=Bounded(-1.0, 1.0, (1,)), nest={"x": Categorical(3)})
    b = Composite(
        obs=Unbounded((4,)),
        extra=Unbounded((1,)),
        action=Bounded(-2.0, 2.0, (1,)),
        nest={"x": Categorical(4)},
    )
    return a, b


def test_stack_of_equal_specs_is_the_expanded_spec():
    spec = Bounded(-1.0, 1.0, (2,))
    assert torch.stack([spec, spec.clone()], 0) == spec.expand(2, 2)
    comp = Composite(obs=spec)
    assert torch.stack([comp, comp.clone()], 0) == comp.expand(2)


def test_stack_of_bounds_that_differ_is_one_bounded_spec():
    out = torch.stack([Bounded(-1.0, 1.0, (1,)), Bounded(-2.0, 3.0, (1,))], 0)
    assert type(out) is Bounded and out.shape == (2, 1)
    assert out.low.flatten().tolist() == [-1.0, -2.0] and out.high.flatten().tolist() == [1.0, 3.0]
    assert out[1] == Bounded(-2.0, 3.0, (1,))  # row i is copy i's spec


def test_stack_of_shapes_that_differ_is_a_stacked_spec():
    spec = torch.stack([Unbounded((3,)), Unbounded((4,))], 0)
    assert isinstance(spec, Stacked) and spec.shape == torch.Size([2, -1])
    assert spec[1] == Unbounded((4,)) and spec.unbind(0) == (Unbounded((3,)), Unbounded((4,)))
    assert spec.is_in([torch.zeros(3), torch.zeros(4)])
    assert not spec.is_in([torch.zeros(3), torch.zeros(5)])
    with pytest.raises(ValueError, match=r"copy 1: shape \[5\] is not compatible with \[4\]"):
        spec.assert_is_in([torch.zeros(3), torch.zeros(5)])
    nested = spec.rand()  # as TorchRL: a nested tensor, one row per copy
    assert nested.is_nested and [r.shape[0] for r in nested.unbind(0)] == [3, 4]
    assert spec.is_in(nested)
    with pytest.raises(ValueError, match=r"the copies' shapes differ, so rand\(shape\)"):
        spec.rand((5,))
    same_shape = torch.stack([Categorical(3), Categorical(4)], 0)  # n differs: Stacked
    assert isinstance(same_shape, Stacked) and same_shape.rand().shape == (2,)
    assert same_shape.is_in(torch.tensor([2, 3])) and not same_shape.is_in(torch.tensor([3, 3]))
    assert LazyStackedTensorSpec is Stacked and LazyStackedCompositeSpec is StackedComposite


def test_stacked_composite_entries_rows_and_data():
    a, b = two_tasks()
    spec = torch.stack([a, b], 0)
    assert isinstance(spec, StackedComposite) and spec.shape == (2,)
    assert spec.keys(True, True) == ["obs", "action", ("nest", "x")]  # what both have
    assert spec[0] == a and spec[1] == b and "extra" in spec[1].keys()
    assert spec["obs"].shape == torch.Size([2, -1]) and type(spec["action"]) is Bounded
    td = spec.rand()
    assert isinstance(td, LazyStackedTensorDict) and td[1]["extra"].shape == (1,)
    assert spec.is_in(td)
    spec.assert_is_in(td)
    td[1]["obs"] = torch.zeros(5)
    assert not spec.is_in(td)
    with pytest.raises(ValueError, match=r"copy 1: Value for key 'obs' is not in the spec"):
        spec.assert_is_in(td)
    td[1]["obs"] = torch.zeros(4)
    del td[1]["extra"]
    with pytest.raises(KeyError, match="copy 1"):
        spec.assert_is_in(td)
    zeros = spec.zero((5,))  # leading dims: copies at dim 1
    assert zeros.batch_size == (5, 2) and zeros[:, 1]["obs"].shape == (5, 4)
    assert spec.to("cpu") == spec and spec.clone() == spec and spec.clone() is not spec


def test_stacked_composite_setitem_and_update_write_into_each_copy():
    a, b = two_tasks()
    spec = StackedComposite([a, b])
    spec["step_count"] = Unbounded((2, 1), dtype=torch.int64)  # one row per copy
    assert a["step_count"] == Unbounded((1,), dtype=torch.int64) == b["step_count"]
    spec["obs"] = Stacked([Unbounded((5,)), Unbounded((6,))])
    assert a["obs"].shape == (5,) and b["obs"].shape == (6,)
    del spec["step_count"]
    assert "step_count" not in a and "step_count" not in b
    with pytest.raises(ValueError, match=r"must have shape \[2, \.\.\.\] \(one row per copy\)"):
        spec["bad"] = Unbounded((3,))


def test_rows_of_plain_specs():
    spec = Composite(obs=Bounded(torch.zeros(2, 3), torch.ones(2, 3), (2, 3)), shape=(2,))
    assert spec[1] == Composite(obs=Bounded(0.0, 1.0, (3,)))
    assert len(spec.unbind(0)) == 2 and spec.unbind(0)[0].shape == ()
    assert OneHot(3).expand(2, 3)[0] == OneHot(3)
    with pytest.raises(IndexError, match="has no batch dim"):
        OneHot(3)[0]
    with pytest.raises(IndexError, match="out of range"):
        spec[2]
    with pytest.raises(TypeError, match=r"takes an int \(a row of dim 0\), got 'a'"):
        Unbounded((2,))["a"]


def test_stack_specs_bad_input():
    with pytest.raises(
        TypeError, match=r"different dtypes or devices cannot be stacked at key 'action'"
    ):
        torch.stack([Composite(action=OneHot(2)), Composite(action=Bounded(-1.0, 1.0, (2,)))], 0)
    with pytest.raises(
        ValueError, match=r"different ndims cannot be stacked \(shapes \[\[3\], \[3, 1\]\]\)"
    ):
        torch.stack([Unbounded((3,)), Unbounded((3, 1))], 0)
    with pytest.raises(TypeError, match="cannot stack a Composite with a leaf spec at key 'obs'"):
        torch.stack([Composite(obs=Unbounded((1,))), Composite(obs={"x": Unbounded((1,))})], 0)
    with pytest.raises(ValueError, match="only dim=0 .* is supported, got dim=1"):
        torch.stack([Unbounded((3,)), Unbounded((4,))], 1)
    with pytest.raises(ValueError, match="Composites of different batch shapes"):
        torch.stack([Composite(shape=(1,)), Composite(x=Unbounded((2, 1)), shape=(2,))], 0)
