"""Models: MLP and ConvNet shapes and lazy init, NoisyLinear, dueling Q-networks."""

import pytest
import torch
from torch import nn

from torchrl_lite.modules import (
    MLP,
    ConvNet,
    DuelingCnnDQNet,
    DuelingMlpDQNet,
    NoisyLazyLinear,
    NoisyLinear,
    NormalParamsWrapper,
    SquashDims,
    reset_noise,
)
from torchrl_lite.modules.models import MLP as MLPFromModels


def _linears(module):
    return [m for m in module.modules() if isinstance(m, (nn.Linear, NoisyLinear))]


def test_models_import_paths():
    assert MLP is MLPFromModels


# -- MLP ----------------------------------------------------------------------------------
def test_mlp_seed_config_lazy_input():
    mlp = MLP(num_cells=[64, 64], out_features=32, activation=nn.ELU)
    out = mlp(torch.randn(5, 11))
    assert out.shape == (5, 32)
    assert [lin.in_features for lin in _linears(mlp)] == [11, 64, 64]
    assert sum(isinstance(m, nn.ELU) for m in mlp) == 2


@pytest.mark.parametrize(
    "num_cells, depth, widths",
    [
        (None, None, [32, 32, 32]),
        (16, 2, [16, 16]),
        (16, None, [16, 16, 16]),
        ([8, 4], None, [8, 4]),
        ([8, 4], 2, [8, 4]),
        (None, 1, [32]),
        (8, 0, []),
    ],
)
def test_mlp_depth_num_cells_combinations(num_cells, depth, widths):
    mlp = MLP(in_features=3, out_features=2, num_cells=num_cells, depth=depth)
    assert [lin.out_features for lin in _linears(mlp)] == [*widths, 2]
    assert mlp(torch.randn(4, 3)).shape == (4, 2)


def test_mlp_depth_mismatch_raises():
    with pytest.raises(ValueError, match="depth=3 does not match"):
        MLP(out_features=2, num_cells=[8, 8], depth=3)


def test_mlp_shape_output_and_extra_batch_dims():
    mlp = MLP(in_features=6, out_features=(3, 2), num_cells=8, depth=1)
    assert mlp(torch.randn(7, 5, 6)).shape == (7, 5, 3, 2)


def test_mlp_concatenates_several_inputs():
    mlp = MLP(out_features=1, num_cells=[8])
    obs, action = torch.randn(4, 3), torch.randn(4, 2)
    out = mlp(obs, action)
    assert out.shape == (4, 1)
    assert _linears(mlp)[0].in_features == 5
    torch.testing.assert_close(out, mlp(torch.cat([obs, action], -1)))


def test_mlp_options():
    mlp = MLP(
        in_features=3,
        out_features=2,
        num_cells=[8, 8],
        activation_class=nn.LeakyReLU,
        activation_kwargs={"negative_slope": 0.2},
        norm_class=nn.LayerNorm,
        dropout=0.1,
        activate_last_layer=True,
        bias_last_layer=False,
    )
    kinds = [type(m).__name__ for m in mlp]
    assert kinds.count("LayerNorm") == 3 and kinds.count("LeakyReLU") == 3
    assert kinds.count("Dropout") == 3
    assert _linears(mlp)[-1].bias is None
    assert all(m.negative_slope == 0.2 for m in mlp if isinstance(m, nn.LeakyReLU))
    mlp.eval()
    assert mlp(torch.randn(2, 3)).shape == (2, 2)


def test_mlp_single_bias_last_layer():
    mlp = MLP(in_features=3, out_features=4, num_cells=[8], single_bias_last_layer=True)
    assert _linears(mlp)[-1].bias is None
    biases = [p for n, p in mlp.named_parameters() if n.endswith("bias") and p.numel() == 1]
    assert len(biases) == 1


def test_mlp_noisy_layers_lazy():
    mlp = MLP(out_features=2, num_cells=[8], layer_class=NoisyLinear)
    assert mlp(torch.randn(3, 5)).shape == (3, 2)
    assert all(isinstance(m, NoisyLinear) for m in _linears(mlp))


def test_mlp_lazy_unsupported_layer_class_raises():
    class MyLinear(nn.Linear):
        pass

    with pytest.raises(ValueError, match="pass in_features"):
        MLP(out_features=2, num_cells=[8], layer_class=MyLinear)


def test_normal_params_wrapper_on_mlp():
    net = NormalParamsWrapper(MLP(num_cells=[16], out_features=6))
    loc, scale = net(torch.randn(4, 3))
    assert loc.shape == scale.shape == (4, 3)
    assert (scale > 0).all()


# -- ConvNet ------------------------------------------------------------------------------
def test_convnet_seed_config_on_84x84():
    net = ConvNet(
        bias_last_layer=True,
        depth=None,
        num_cells=[32, 64, 64],
        kernel_sizes=[8, 4, 3],
        strides=[4, 2, 1],
    )
    out = net(torch.randn(2, 3, 84, 84))
    assert out.shape == (2, 64 * 7 * 7)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert [c.in_channels for c in convs] == [3, 32, 64]


def test_convnet_extra_batch_dims_match_flat_batch():
    net = ConvNet(in_features=2, num_cells=[4, 4], kernel_sizes=3, strides=1)
    x = torch.randn(3, 5, 2, 10, 10)
    out = net(x)
    assert out.shape == (3, 5, 4 * 6 * 6)
    torch.testing.assert_close(out.reshape(15, -1), net(x.reshape(15, 2, 10, 10)))
    assert net(x[0, 0]).shape == (4 * 6 * 6,)  # a single [C, H, W] image


def test_convnet_paddings_norm_and_squeeze():
    net = ConvNet(
        in_features=1,
        num_cells=[4, 1],
        kernel_sizes=[3, 8],
        paddings=[1, 0],
        norm_class=nn.BatchNorm2d,
        aggregator_class=None,
        squeeze_output=True,
    )
    assert net(torch.randn(2, 1, 8, 8)).shape == (2,)


def test_convnet_bad_input_raises():
    with pytest.raises(ValueError, match=r"\[\*B, C, H, W\]"):
        ConvNet()(torch.randn(4, 4))
    with pytest.raises(ValueError, match="kernel_sizes has 2 entries"):
        ConvNet(num_cells=[4, 4, 4], kernel_sizes=[3, 3])


def test_squash_dims():
    assert SquashDims()(torch.zeros(2, 3, 4, 5)).shape == (2, 60)


# -- NoisyLinear --------------------------------------------------------------------------
def test_noisy_linear_noise_resets_and_eval_is_deterministic():
    layer = NoisyLinear(5, 3, std_init=0.5)
    x = torch.randn(4, 5)
    first = layer(x)
    torch.testing.assert_close(layer(x), first)  # same noise until reset
    eps = layer.weight_epsilon.clone()
    layer.reset_noise()
    assert not torch.equal(layer.weight_epsilon, eps)
    assert not torch.allclose(layer(x), first)
    # factorised noise: epsilon is an outer product (rank 1)
    assert torch.linalg.matrix_rank(layer.weight_epsilon) == 1
    torch.testing.assert_close(
        layer.weight_epsilon[:, 0],
        layer.bias_epsilon * layer.weight_epsilon[0, 0] / layer.bias_epsilon[0],
    )
    layer.eval()
    mean_out = x @ layer.weight_mu.T + layer.bias_mu
    torch.testing.assert_close(layer(x), mean_out)
    layer.reset_noise()
    torch.testing.assert_close(layer(x), mean_out)


def test_noisy_linear_init_and_gradients():
    layer = NoisyLinear(16, 4, std_init=0.4)
    assert (layer.weight_mu.abs() <= 0.25).all()
    torch.testing.assert_close(layer.weight_sigma, torch.full((4, 16), 0.1))
    layer(torch.randn(2, 16)).sum().backward()
    assert layer.weight_sigma.grad is not None and layer.weight_sigma.grad.abs().sum() > 0
    assert "weight_epsilon" in dict(layer.named_buffers())


def test_noisy_lazy_linear_and_apply_reset_noise():
    net = nn.Sequential(NoisyLazyLinear(4), nn.ReLU(), NoisyLinear(4, 2, bias=False))
    net(torch.randn(3, 7))
    assert net[0].in_features == 7 and type(net[0]) is NoisyLinear
    before = [m.weight_epsilon.clone() for m in _linears(net)]
    net.apply(reset_noise)
    after = [m.weight_epsilon for m in _linears(net)]
    assert all(not torch.equal(a, b) for a, b in zip(after, before))


# -- dueling ------------------------------------------------------------------------------
def test_dueling_cnn_output_is_value_plus_centered_advantage():
    net = DuelingCnnDQNet(
        out_features=5,
        cnn_kwargs={"num_cells": [8, 8], "kernel_sizes": [8, 4], "strides": [4, 2]},
        mlp_kwargs={"num_cells": 16},
    )
    x = torch.randn(2, 3, 4, 40, 40)
    q = net(x)
    assert q.shape == (2, 3, 5)
    h = net.features(x)
    value, adv = net.value(h), net.advantage(h)
    torch.testing.assert_close(q, value + adv - adv.mean(-1, keepdim=True))
    torch.testing.assert_close(q.mean(-1, keepdim=True), value)


def test_dueling_mlp():
    net = DuelingMlpDQNet(out_features=3)
    q = net(torch.randn(6, 4))
    assert q.shape == (6, 3)
    h = net.features(torch.zeros(1, 4))
    torch.testing.assert_close(net(torch.zeros(1, 4)).mean(-1, keepdim=True), net.value(h))
