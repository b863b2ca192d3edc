"""An image-text model as a classifier: its image tower and a zero-shot head (:mod:`zoomeval.inference.zero_shot`)."""

from __future__ import annotations

import torch

from zoomeval.inference.zero_shot import LOGIT_SCALE


class ZeroShotClassifier(torch.nn.Module):
    """``logits = 100 * normalise(image features) @ head.T`` for an open_clip model and a ``(classes, dim)`` head."""

    def __init__(self, model: torch.nn.Module, head: torch.Tensor) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("head", head.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = self.model.encode_image(x, normalize=True).float()
        return LOGIT_SCALE * features @ self.head.T
