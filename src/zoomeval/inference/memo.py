"""MEMO (Zhang, Levine & Finn, NeurIPS 2022) as its authors ran it on ImageNet: test-time adaptation of a
classifier on one image at a time.

For each test image, :class:`Memo` restores the original weights and buffers (episodic), takes ``steps`` SGD
steps on the marginal entropy of K augmented views (:func:`marginal_entropy`), with BatchNorm normalising by a
blend of its running statistics and the statistics of the K views (:func:`batch_norm_prior`), and then predicts
on the image's standard view. The views themselves come from :mod:`zoomeval.inference.tta_views`, the settings
(:class:`~zoomeval.core.config.MemoSettings`) from the config's ``tta`` section.

The BatchNorm blend follows the authors' code (``_modified_bn_forward``, after Schneider et al. 2020): per channel,
``mean = p * running_mean + (1 - p) * batch_mean`` and likewise for the variance, with ``p = N / (N + 1)`` for the
prior strength N (16), the batch statistics taken over every view and pixel of the input and the variance
unbiased; the running statistics are never updated and no gradient flows through the batch statistics. The
authors patched ``nn.BatchNorm2d.forward`` on the class, which silently skips subclasses that override
``forward`` (timm's ``BatchNormAct2d``, all 49 BatchNorm layers of the embedded EfficientNet-Lite0); here every
BatchNorm module is switched one by one and runs its own ``forward`` on the blended statistics, so BatchNorm +
activation layers keep their activation.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

from zoomeval.core.config import MemoSettings


def marginal_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the mean of the softmax distributions of ``logits`` (K views x C classes): one scalar.

    The log of the mean probability is taken in log space (log-sum-exp over the views minus log K) and clamped at
    the dtype's most negative value, so that a probability that underflows to 0 gives ``0 * log 0 = 0``, not NaN.
    """
    log_probs = logits.log_softmax(dim=1)
    log_mean = log_probs.logsumexp(dim=0) - math.log(logits.shape[0])
    log_mean = log_mean.clamp(min=torch.finfo(log_mean.dtype).min)
    return -(log_mean.exp() * log_mean).sum()


def batch_norm_layers(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """Every BatchNorm module of ``model`` (any dimension, subclasses included)."""
    return [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def _blended_forward(layer: nn.modules.batchnorm._BatchNorm, prior: float, x: torch.Tensor) -> torch.Tensor:
    if layer.training or layer.running_mean is None or layer.running_var is None:
        raise RuntimeError(f"{type(layer).__name__}: the BatchNorm prior needs eval mode and running statistics")
    with torch.no_grad():  # the statistics are constants for backprop, as in the authors' code
        # Training-mode batch_norm with momentum 1 writes the input's mean and unbiased variance per channel into
        # the buffers (the authors' way, and faster on a CPU than Tensor.var over the batch and pixel dimensions).
        batch_mean, batch_var = torch.zeros_like(layer.running_mean), torch.ones_like(layer.running_var)
        nn.functional.batch_norm(x, batch_mean, batch_var, None, None, True, 1.0, layer.eps)
        mean = prior * layer.running_mean + (1 - prior) * batch_mean
        var = prior * layer.running_var + (1 - prior) * batch_var
    running = layer.running_mean, layer.running_var
    # The layer's own forward (with its activation, for BatchNormAct2d) normalises by the running statistics in eval
    # mode: hand it the blend for this call. New tensors, not in-place writes: the originals stay untouched.
    layer.running_mean, layer.running_var = mean, var
    try:
        return type(layer).forward(layer, x)
    finally:
        layer.running_mean, layer.running_var = running


@contextmanager
def batch_norm_prior(model: nn.Module, strength: float | None) -> Iterator[int]:
    """Within the block, every BatchNorm layer of ``model`` (in eval mode) normalises with its running statistics
    blended ``N : 1`` with the statistics of its current input, N = ``strength``; ``None`` leaves BatchNorm as it
    is. Yields the number of layers switched."""
    layers = batch_norm_layers(model) if strength is not None else []
    prior = 0.0 if strength is None else strength / (strength + 1)
    for layer in layers:
        layer.forward = lambda x, layer=layer: _blended_forward(layer, prior, x)  # type: ignore[method-assign]
    try:
        yield len(layers)
    finally:
        for layer in layers:
            del layer.forward  # the class's forward again


class Memo:
    """MEMO on one model (in eval mode, on its device): :meth:`reset`, :meth:`adapt`, then :meth:`logits`."""

    def __init__(self, model: nn.Module, settings: MemoSettings) -> None:
        self.model, self.settings = model.eval(), settings
        # A copy of every parameter and buffer, restored in place before each image: the optimizer and the
        # BatchNorm layers keep their tensors, and the values come back bit for bit.
        self.original = {k: v.detach().clone() for k, v in model.state_dict(keep_vars=True).items()}
        self.bn_layers = len(batch_norm_layers(model))

    def reset(self) -> None:
        """Restore the weights and buffers the model had when this object was made."""
        with torch.no_grad():
            for name, tensor in self.model.state_dict(keep_vars=True).items():
                tensor.copy_(self.original[name])

    def adapt(self, views: Sequence[torch.Tensor], subset: torch.Tensor) -> list[float]:
        """One SGD step per batch in ``views`` (each K normalised views on the model's device) on the marginal
        entropy over the ``subset`` logits; returns the losses."""
        s = self.settings
        params = list(self.model.parameters())
        for p in params:
            p.requires_grad_(True)
        # A new optimizer per image: momentum must not carry over from the previous image.
        optimizer = torch.optim.SGD(params, lr=s.lr, momentum=s.momentum, weight_decay=s.weight_decay)
        losses = []
        for batch in views:
            optimizer.zero_grad(set_to_none=True)
            with batch_norm_prior(self.model, s.prior_strength):
                loss = marginal_entropy(self.model(batch)[:, subset])
            loss.backward()
            optimizer.step()
            losses.append(float(loss.detach()))
        return losses

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """All logits of the model for ``x``, with the BatchNorm prior if ``prior_at_prediction``."""
        strength = self.settings.prior_strength if self.settings.prior_at_prediction else None
        with torch.no_grad(), batch_norm_prior(self.model, strength):
            return self.model(x).float()
