"""A model on its device that turns batches of uint8 crops into prediction columns."""

from __future__ import annotations

import contextlib
import faulthandler
import hashlib
import io
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from zoomeval.core.config import InferenceSettings, ModelSpec
from zoomeval.core.devices import resolve_device
from zoomeval.inference.class_order import uncovered
from zoomeval.inference.models import LoadedModel, load_model

log = logging.getLogger(__name__)


def check_normalisation(spec: ModelSpec) -> None:
    """Refuse a configured ``mean``/``std`` that would make every input NaN or infinite."""
    for key, values in (("mean", spec.mean), ("std", spec.std)):
        if values is None:
            continue
        if len(values) != 3 or not all(math.isfinite(v) for v in values) or (key == "std" and min(values) <= 0):
            need = "three finite numbers" + (" > 0" if key == "std" else "")
            raise ValueError(f"models.{spec.name}.{key} is {list(values)}; it must be {need}: fix it in the config")


def parameters_sha256(module: torch.nn.Module) -> str:
    """The sha256 of ``module``'s parameters and buffers: each ``state_dict`` tensor's name, dtype, shape and bytes,
    in the order of their names (the same on any device and memory format; a module's extra state is left out)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        if not isinstance(tensor, torch.Tensor):
            continue
        values = tensor.detach().cpu().contiguous()
        digest.update(f"{name} {values.dtype} {tuple(values.shape)}\n".encode())
        digest.update(values.reshape(-1).view(torch.uint8).numpy())
    return digest.hexdigest()


class Classifier:
    """A loaded model on its device that turns uint8 NHWC crop batches into prediction columns.

    The model is ``spec``'s with the weights fetched into ``weights`` (and ``head``, the derived file of a source that
    declares one), or ``loaded`` (e.g. a random-init network for a benchmark); ``compile_options`` are inductor's with
    ``compile: true`` (``bench/gpu_check.py`` measures ``freezing``, which folds BatchNorm into the convolutions,
    and ``triton.cudagraphs``)."""

    def __init__(
        self,
        spec: ModelSpec,
        settings: InferenceSettings,
        class_indices: Sequence[int] | None,
        weights: Path | None = None,
        loaded: LoadedModel | None = None,
        head: Path | None = None,
        compile_options: dict[str, Any] | None = None,
    ) -> None:
        self.device = resolve_device(settings.device, "inference.device")
        self.settings = settings = settings.for_device(self.device.type)
        self.name = spec.name
        check_normalisation(spec)
        loaded = loaded or load_model(spec, weights, head)
        self.weights_sha256 = loaded.weights_sha256
        #: the network's parameters as loaded (:func:`parameters_sha256`), by which a reader tells that they are
        #: still those of the weights ``weights_sha256`` names (:func:`zoomeval.policy.tta.check_classifier`)
        self.parameters_sha256 = parameters_sha256(loaded.module)
        self.provenance = loaded.provenance
        self.normalisation = {"mean": list(loaded.mean), "std": list(loaded.std)}
        self.memory_format = torch.channels_last if settings.channels_last else torch.contiguous_format
        self.model = loaded.module.to(self.device).to(memory_format=self.memory_format)
        self.mean = torch.tensor(loaded.mean, device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(loaded.std, device=self.device).view(1, 3, 1, 1) * 255
        if absent := uncovered(loaded.classes, class_indices):
            shown = ", ".join(absent[:5]) + (", ..." if len(absent) > 5 else "")
            raise ValueError(
                f"model {spec.name!r} has no logit for {len(absent)} classes this dataset is scored over "
                f"({shown}): its class order does not cover the dataset's class set, so it cannot be "
                "scored there"
            )
        indices = class_indices if class_indices is not None else range(1000)
        self.subset = torch.tensor(list(indices), device=self.device)
        self.autocast = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[settings.precision]
        # Compiled, the conversion and normalisation of the uint8 crops are fused into the model's first kernels.
        self.forward = self._compiled(compile_options) if settings.compile else self._forward

    def _compiled(self, options: dict[str, Any] | None) -> Callable[[torch.Tensor], torch.Tensor]:
        """The forward pass through torch.compile: an error in the compiler (or its worker processes) names the
        setting, and a crash of this process (a segfault) leaves its stack in the job's log after a line naming it."""
        with contextlib.suppress(io.UnsupportedOperation, AttributeError, ValueError):  # stderr may be no file
            faulthandler.enable(sys.stderr)
        log.info(
            "inference.compile: true: the model is compiled on its first batch; should this job die there, "
            "set inference.compile: false"
        )
        compiled = torch.compile(self._forward, options=options)

        def forward(crops: torch.Tensor) -> torch.Tensor:
            try:
                return compiled(crops)
            except torch.OutOfMemoryError:  # the batch's, not the compiler's
                raise
            except Exception as error:  # torch._dynamo wraps the compiler's failures in its own exception types
                raise RuntimeError(
                    f"model {self.name!r} failed under torch.compile (inference.compile: true): "
                    f"{error}; set inference.compile: false"
                ) from error

        return forward

    def logits(self, crops: torch.Tensor) -> torch.Tensor:
        """The fp32 logits of a batch of uint8 NHWC crops (on any device)."""
        return self.forward(crops.to(self.device, non_blocking=True))

    def _forward(self, crops: torch.Tensor) -> torch.Tensor:
        x = crops.permute(0, 3, 1, 2).float()
        x = ((x - self.mean) / self.std).contiguous(memory_format=self.memory_format)
        with torch.autocast(self.device.type, dtype=self.autocast, enabled=self.autocast is not None):
            return self.model(x).float()

    @staticmethod
    def finite(logits: torch.Tensor) -> torch.Tensor:
        """Which rows of ``logits`` are all finite, on the device (no wait for it)."""
        return torch.isfinite(logits).all(dim=1)

    def check_finite(self, finite: np.ndarray, where: Callable[[int], str]) -> None:
        """Refuse non-finite logits (fp16 overflow, broken weights): ``finite`` is :meth:`finite` of the rows on the
        host; the error names what the first bad row is (``where``)."""
        if finite.all():
            return
        raise FloatingPointError(
            f"model {self.name!r} at precision {self.settings.precision} gave non-finite logits (NaN or inf) for "
            f"{where(int(np.argmin(finite)))}; with fp16 or bf16 use precision: fp32, else check the model's "
            "weights and its mean/std"
        )

    def probabilities(self, logits: torch.Tensor) -> torch.Tensor:
        """Softmax over the dataset's class set."""
        return logits[:, self.subset].softmax(dim=1)

    def device_columns(self, logits: torch.Tensor, probs: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """The prediction columns of a batch, on the device in their file's types; ``probs`` is :meth:`probabilities`
        if already computed."""
        prob, arg = (self.probabilities(logits) if probs is None else probs).max(dim=1)
        out = {
            "pred": self.subset[arg].to(torch.int16),
            "pred_full": logits.argmax(dim=1).to(torch.int16),
            "conf": prob.float(),
        }
        if self.settings.store_top5:
            values, indices = logits.topk(5, dim=1)
            out |= {"top5": indices.to(torch.int16), "top5_logit": values.float()}
        return out

    def columns(self, logits: torch.Tensor, probs: torch.Tensor | None = None) -> dict[str, np.ndarray]:
        """:meth:`device_columns` copied to the host."""
        return {name: values.cpu().numpy() for name, values in self.device_columns(logits, probs).items()}
