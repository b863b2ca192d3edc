"""MEMO: the marginal-entropy loss and its gradient, the SGD step, the BatchNorm prior and the episodic reset, against
hand computations."""

import math

import numpy as np
import pytest
import skimage.data
import torch
from PIL import Image
from timm.layers import BatchNormAct2d
from torch import nn

from zoomeval.core.config import MemoSettings, ModelSpec
from zoomeval.inference.memo import Memo, batch_norm_layers, batch_norm_prior, marginal_entropy
from zoomeval.inference.models import load_model
from zoomeval.inference.sources import embedded
from zoomeval.inference.tta_views import make_views

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_memo")

LITE0 = ModelSpec("lite0", "embedded", embedded.ARCHITECTURE, embedded.WEIGHTS_FILE)


@pytest.fixture(scope="module")
def lite0() -> nn.Module:
    torch.set_num_threads(2)
    return load_model(LITE0, None).module


def test_marginal_entropy_is_the_entropy_of_the_mean_softmax() -> None:
    # view 1: softmax (0.5, 0.5); view 2: (0.9, 0.1); mean (0.7, 0.3)
    logits = torch.tensor([[0.0, 0.0], [math.log(9), 0.0]], dtype=torch.float64)
    expected = -(0.7 * math.log(0.7) + 0.3 * math.log(0.3))  # 0.6108643...
    assert marginal_entropy(logits).item() == pytest.approx(expected, abs=1e-12)
    # a probability that underflows to 0 contributes 0, not NaN
    assert marginal_entropy(torch.tensor([[0.0, -1e5], [0.0, -1e5]])).item() == pytest.approx(0.0, abs=1e-6)


def hand_gradient(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, subset: list[int]
) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss and gradients of the marginal entropy of a linear layer's subset logits, by the chain rule:
    dH/dz_kj = -(1/K) p_kj (log pbar_j - sum_c p_kc log pbar_c) on the subset columns, 0 elsewhere."""
    z = (x @ w.T + b)[:, subset]
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    pbar = p.mean(axis=0)
    loss = -(pbar * np.log(pbar)).sum()
    k = len(x)
    g_sub = -(1 / k) * p * (np.log(pbar)[None, :] - (p * np.log(pbar)[None, :]).sum(axis=1, keepdims=True))
    g = np.zeros((k, len(b)))
    g[:, subset] = g_sub
    return loss, g.T @ x, g.sum(axis=0)


def test_the_loss_gradient_and_the_sgd_step_match_a_hand_computation() -> None:
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=5)
    subset = [0, 2, 3]  # the loss sees only the dataset's classes, like ImageNet-A's 200
    net = nn.Linear(4, 5).double()
    with torch.no_grad():
        net.weight.copy_(torch.from_numpy(w))
        net.bias.copy_(torch.from_numpy(b))
    loss, dw, db = hand_gradient(x, w, b, subset)

    out = marginal_entropy(net(torch.from_numpy(x))[:, subset])
    out.backward()
    assert out.item() == pytest.approx(loss, abs=1e-12)
    np.testing.assert_allclose(net.weight.grad.numpy(), dw, atol=1e-12)
    np.testing.assert_allclose(net.bias.grad.numpy(), db, atol=1e-12)
    assert not net.weight.grad[[1, 4]].any()  # classes outside the subset get no gradient

    net.zero_grad()
    memo = Memo(net, MemoSettings(lr=0.1, momentum=0.0, weight_decay=0.0))
    losses = memo.adapt([torch.from_numpy(x)], torch.tensor(subset))
    assert losses == [pytest.approx(loss, abs=1e-12)]
    np.testing.assert_allclose(net.weight.detach().numpy(), w - 0.1 * dw, atol=1e-12)
    np.testing.assert_allclose(net.bias.detach().numpy(), b - 0.1 * db, atol=1e-12)


# Channel 0 holds 1, 3, 5, 7 (mean 4, unbiased variance 20/3); channel 1 holds 0, 0, 2, 2 (mean 1, variance 4/3).
BN_INPUT = torch.tensor([[[[1.0, 3.0]], [[0.0, 0.0]]], [[[5.0, 7.0]], [[2.0, 2.0]]]], dtype=torch.float64)
RUNNING_MEAN, RUNNING_VAR = [1.0, -1.0], [4.0, 0.5]
WEIGHT, BIAS = [2.0, 1.0], [0.5, -3.0]
# Blended 16/17 : 1/17 by hand: mean 16/17 * 1 + 4/17 = 20/17 and -16/17 + 1/17 = -15/17; variance
# 16/17 * 4 + (20/3)/17 = 212/51 and 16/17 * 0.5 + (4/3)/17 = 28/51.
BLENDED_MEAN, BLENDED_VAR = [20 / 17, -15 / 17], [212 / 51, 28 / 51]


def hand_normalised(eps: float) -> torch.Tensor:
    out = torch.empty_like(BN_INPUT)
    for c in range(2):
        out[:, c] = (BN_INPUT[:, c] - BLENDED_MEAN[c]) / math.sqrt(BLENDED_VAR[c] + eps) * WEIGHT[c] + BIAS[c]
    return out


def set_bn(layer: nn.modules.batchnorm._BatchNorm) -> nn.modules.batchnorm._BatchNorm:
    layer = layer.double().eval()
    with torch.no_grad():
        layer.running_mean.copy_(torch.tensor(RUNNING_MEAN))
        layer.running_var.copy_(torch.tensor(RUNNING_VAR))
        layer.weight.copy_(torch.tensor(WEIGHT))
        layer.bias.copy_(torch.tensor(BIAS))
    return layer


@pytest.mark.parametrize(
    "make",
    [lambda: nn.BatchNorm2d(2), lambda: BatchNormAct2d(2, act_layer=nn.ReLU)],
    ids=["BatchNorm2d", "timm BatchNormAct2d"],
)
def test_the_batch_norm_prior_blends_running_and_batch_statistics_16_to_1(make) -> None:
    layer = set_bn(make())
    net = nn.Sequential(layer)
    plain = net(BN_INPUT)
    with batch_norm_prior(net, 16) as switched:
        out = net(BN_INPUT)
    expected = hand_normalised(layer.eps)
    if isinstance(layer, BatchNormAct2d):
        expected = expected.clamp(min=0)  # the layer's own activation still runs
    assert switched == 1
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    # the running statistics were read, never written, and the class's forward is back after the block
    assert layer.running_mean.tolist() == RUNNING_MEAN and layer.running_var.tolist() == RUNNING_VAR
    torch.testing.assert_close(net(BN_INPUT), plain, rtol=0, atol=0)
    with batch_norm_prior(net, None) as switched:
        assert switched == 0
        torch.testing.assert_close(net(BN_INPUT), plain, rtol=0, atol=0)


def test_no_gradient_flows_through_the_batch_statistics() -> None:
    layer = set_bn(nn.BatchNorm2d(2))
    x = BN_INPUT.clone().requires_grad_(True)
    with batch_norm_prior(layer, 16):
        layer(x).sum().backward()
    # with constant statistics, d out / d x = weight / sqrt(var + eps) for every element of a channel
    for c in range(2):
        assert torch.allclose(x.grad[:, c], torch.full_like(x.grad[:, c], WEIGHT[c] / math.sqrt(BLENDED_VAR[c] + 1e-5)))


def test_every_batch_norm_layer_of_the_embedded_model_is_switched(lite0: nn.Module) -> None:
    layers = batch_norm_layers(lite0)
    assert len(layers) == 49 and all(isinstance(m, BatchNormAct2d) for m in layers)  # MEMO's class patch misses all
    seen: dict[nn.Module, tuple[torch.Tensor, torch.Tensor]] = {}
    hooks = [m.register_forward_hook(lambda m, i, o: seen.__setitem__(m, (i[0], o))) for m in layers]
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    try:
        with torch.no_grad(), batch_norm_prior(lite0, 16):
            lite0(x)
    finally:
        for h in hooks:
            h.remove()
    assert set(seen) == set(layers)
    for m, (inp, out) in seen.items():
        dims = [0, 2, 3]
        mean = 16 / 17 * m.running_mean + 1 / 17 * inp.mean(dims)
        var = 16 / 17 * m.running_var + 1 / 17 * inp.var(dims, correction=1)
        expected = m.act(nn.functional.batch_norm(inp, mean, var, m.weight, m.bias, False, 0.0, m.eps))
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        assert not torch.allclose(
            out,
            m.act(nn.functional.batch_norm(inp, m.running_mean, m.running_var, m.weight, m.bias, False, 0.0, m.eps)),
        )


def test_adapting_changes_the_weights_never_the_buffers_and_reset_restores_them_bit_for_bit(lite0) -> None:
    original = {k: v.clone() for k, v in lite0.state_dict().items()}
    memo = Memo(lite0, MemoSettings(views=2, lr=0.01))
    image = Image.fromarray(skimage.data.chelsea())
    views = (make_views(image, "memo_rrc", 2, 224, seed=1) - 0.5) / 0.5
    memo.adapt([views], torch.arange(1000))
    after = lite0.state_dict()
    changed = [k for k in original if not torch.equal(after[k], original[k])]
    buffers = {name for name, _ in lite0.named_buffers()}
    assert changed and not set(changed) & buffers  # BatchNorm running statistics are never updated
    assert {"conv_stem.weight", "classifier.weight", "bn1.weight"} <= set(changed)  # all parameters adapt
    memo.reset()
    after = lite0.state_dict()
    assert all(torch.equal(after[k], original[k]) and after[k].dtype == original[k].dtype for k in original)
