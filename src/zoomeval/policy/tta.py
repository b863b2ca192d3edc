"""A fitted label-free zoom policy (a file of ``zoomeval policy save``, :mod:`zoomeval.policy.fitted`) as a
test-time wrapper of a classifier: :class:`ZoomTTA` cuts the study's own crops of the policy's views
(:func:`zoomeval.core.zoom.all_crops`, the predict job's host path), runs only the forward passes the policy needs
(a cascade stops per image at the first view with ``conf >= tau``) and answers each image by the rule of
:mod:`zoomeval.analysis.policies`, applied to the outputs it computed. The file is read only through its
declaration, :data:`zoomeval.policy.document.POLICY`."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image

from zoomeval.analysis.policies import (
    Selector,
    Views,
    choose_cascade,
    choose_max_conf,
    choose_selector,
    choose_vote,
)
from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.config import MAX_RESIZED_PIXELS
from zoomeval.core.images import to_rgb, too_large
from zoomeval.core.zoom import Transform, all_crops
from zoomeval.inference.classifier import Classifier, parameters_sha256
from zoomeval.policy.document import read_policy


class Answer(NamedTuple):
    """One image's answer: the class index (of the model's 1000, in the dataset's class set), its softmax
    confidence over that set, the view that gave it as ``(scale, row, col)`` and the forward passes spent."""

    label: int
    confidence: float
    view: tuple[int, int, int]
    passes: int


def check_classifier(classifier: Classifier, document: Mapping[str, Any]) -> None:
    """Refuse a classifier other than the one the policy was fitted for: other weights (by sha256), another
    normalisation of its inputs (the same weights fed otherwise give other confidences), another class set (other
    softmaxes), or parameters changed since it loaded its weights (:attr:`Classifier.parameters_sha256`: a head
    zeroed, a layer fine-tuned or a BatchNorm run in training mode, in memory)."""
    model = document["model"]
    if classifier.weights_sha256 != model["weights_sha256"]:
        raise ValueError(
            f"the policy was fitted for weights with sha256 {model['weights_sha256']}, this model's have "
            f"{classifier.weights_sha256}: its confidences would not be the ones it was fitted on"
        )
    fed = {"mean": model["mean"], "std": model["std"]}
    if not all(np.allclose(classifier.normalisation[k], fed[k], rtol=0, atol=1e-12) for k in fed):
        raise ValueError(
            f"the policy was fitted for inputs normalised with {fed}, this model's are {classifier.normalisation}"
        )
    classes, own = model["class_indices"] or list(range(NUM_CLASSES)), classifier.subset.tolist()
    if own != classes:
        raise ValueError(
            f"the policy was fitted for confidences over its model's class_indices ({len(classes)} classes), this "
            f"model's are over {len(own)} other classes: build it with the policy's class_indices"
        )
    if (now := parameters_sha256(classifier.model)) != classifier.parameters_sha256:
        raise ValueError(
            f"this model's parameters have sha256 {now}, not the {classifier.parameters_sha256} of the weights it "
            "loaded: they were changed in memory since, so its confidences would not be the ones it was fitted on"
        )


class ZoomTTA:
    """``model`` answering through a fitted zoom policy (a file of ``zoomeval policy save``, or its document,
    read by :func:`read_policy`, ``zoomeval.load_policy``): ``tta(images)`` gives each image's :class:`Answer`.

    ``model`` is your own ``torch.nn.Module`` (in eval mode, on the device it runs on, mapping a float batch
    ``(N, 3, crop_size, crop_size)`` normalised with the policy's ``mean``/``std`` to 1000 ImageNet-1k logits) or a
    :class:`zoomeval.inference.classifier.Classifier`; :meth:`from_file` builds the policy's own model. A module is
    run as the study ran its model: normalised by the wrapper, at the policy's ``precision``, converted in place to
    channels-last where the policy's model was, ``batch_size`` crops per forward pass. It is refused unless its
    parameters and buffers are those of the policy's verified weights, which ``weights`` (a study directory or
    resources folder, as for :meth:`from_file`) must hold (:func:`zoomeval.policy.tta.same_network`, naming the first
    that differs).

    Before its first answer it refuses a network that is not the one the policy was fitted for
    (:func:`zoomeval.policy.tta.check_classifier`: the weights file's sha256, the normalisation, the class set, and the
    parameters' sha256 recomputed against the one taken when the verified weights were loaded or the module was
    compared with them) and, at the first batch, one whose logits are not one per ImageNet-1k class. So it catches
    other weights, a fine-tuned layer, a zeroed head, BatchNorm statistics updated in training mode, another dtype,
    a module left in training mode, and a wrapper that adds or renames parameters or buffers (a ``torch.compile``'d
    module too: give it before compiling). It cannot catch a change of code rather than parameters (a patched
    ``forward``, a wrapper without parameters of its own, a library version whose layers compute otherwise), a
    :class:`Classifier` built from a network changed before (``loaded=``: its ``weights_sha256`` is then the
    caller's word), nor parameters changed after this check.

    Images are PIL images as opened or ``torch.uint8`` tensors ``(C, H, W)`` (torchvision's layout, C 1 to 4: grey,
    grey and alpha, RGB, RGBA), or a batch tensor ``(N, C, H, W)``, of any size: each is decoded as the study decodes
    its images (:meth:`decoded`); ``max_pixels`` is the study's ``max_resized_pixels`` (by default the config's)."""

    def __init__(
        self,
        model: Classifier | torch.nn.Module,
        policy: str | os.PathLike[str] | Mapping[str, Any],
        max_pixels: int = MAX_RESIZED_PIXELS,
        *,
        weights: str | os.PathLike[str] | None = None,
        batch_size: int = 64,
    ) -> None:
        self.policy = read_policy(policy)
        if isinstance(model, torch.nn.Module):
            if weights is None:
                raise ValueError(
                    "weights: give the study directory or resources folder holding the policy's verified weights: "
                    "a module is checked against them"
                )
            model = study_classifier(self.policy, study_resources(weights), batch_size=batch_size, module=model)
        elif not isinstance(model, Classifier):
            raise TypeError(f"expected a torch.nn.Module or a zoomeval Classifier, not a {type(model).__name__}")
        check_classifier(model, self.policy)
        self.classifier, self.max_pixels = model, max_pixels
        self.views = [tuple(v) for v in self.policy["views"]]
        self.size, self.backend = self.policy["model"]["crop_size"], self.policy["model"]["crop_backend"]

    @classmethod
    def from_file(
        cls,
        policy: str | os.PathLike[str] | Mapping[str, Any],
        weights: str | os.PathLike[str],
        device: str = "cpu",
        batch_size: int = 64,
        max_pixels: int = MAX_RESIZED_PIXELS,
        fetch: bool = True,
    ) -> ZoomTTA:
        """The wrapper of the policy file ``policy`` around the model it was fitted for, built by
        :func:`zoomeval.policy.tta.study_classifier` from the verified weights under ``weights``: a study directory
        (its ``resources/``) or a resources folder (a library's weights fetched there if missing and ``fetch``), on
        ``device``, ``batch_size`` crops per forward pass."""
        document = read_policy(policy)
        classifier = study_classifier(document, study_resources(weights), device, batch_size, fetch)
        return cls(classifier, document, max_pixels)

    def decoded(self, image: Image.Image, where: str) -> Image.Image:
        """``image`` as the study decodes its images (:func:`zoomeval.core.images.to_rgb`: 16-bit greyscale scaled,
        palette, CMYK and alpha converted by PIL, EXIF orientation ignored), refused naming ``where`` where it has no
        8-bit RGB mapping or where its resize to the policy's largest scale would exceed ``max_pixels``
        (:func:`zoomeval.core.images.too_large`, the study's check, made before its pixels are read)."""
        if why := too_large(image.width, image.height, max(v[0] for v in self.views), self.max_pixels):
            raise ValueError(f"{where}: {why}")
        if image.mode == "RGB":  # already the study's form (predict's images arrive decoded): no copy
            return image
        try:
            return to_rgb(image)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None

    def crops(self, image: Image.Image, views: Sequence[int], cut: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """``(len(views), size, size, 3)`` uint8: the views (positions in the policy's order) of ``image``, each
        scale resized once and cut as the predict job cuts it (kept in ``cut``, by scale, for a cascade's next
        round)."""
        cut = {} if cut is None else cut
        for s in {self.views[v][0] for v in views} - cut.keys():
            cut[s] = all_crops(image, [s], self.size, self.backend)  # one scale: its 9 anchors in order
        return np.stack([cut[self.views[v][0]][3 * self.views[v][1] + self.views[v][2]] for v in views])

    def _run(
        self,
        images: Sequence[Image.Image],
        pairs: list[tuple[int, int]],
        pred: np.ndarray,
        conf: np.ndarray,
        cut: dict[int, dict[int, np.ndarray]],
    ) -> None:
        """Fill ``pred``/``conf`` at each ``(image, view)`` of ``pairs``, in batches of the classifier's size
        (``cut``: each image's resized scales so far)."""
        if not pairs:
            return
        by_image: dict[int, list[int]] = {}
        for i, v in pairs:
            by_image.setdefault(i, []).append(v)
        crops = np.concatenate([self.crops(images[i], views, cut.setdefault(i, {})) for i, views in by_image.items()])
        order = [(i, v) for i, views in by_image.items() for v in views]
        step = self.classifier.settings.batch_size
        with torch.inference_mode():
            for start in range(0, len(order), step):
                batch = order[start : start + step]
                logits = self.classifier.logits(torch.from_numpy(crops[start : start + step]))
                if logits.shape[1] != NUM_CLASSES:  # its class_indices would index past them
                    raise ValueError(
                        f"this model gives {logits.shape[1]} logits per crop; the policy's model gives one per "
                        f"ImageNet-1k class ({NUM_CLASSES}): not the network it was fitted for"
                    )
                self.classifier.check_finite(
                    self.classifier.finite(logits).cpu().numpy(),
                    lambda r, b=batch: f"view {self.views[b[r][1]]} of image {b[r][0]}",
                )
                columns = self.classifier.columns(logits)
                for (i, v), p, c in zip(batch, columns["pred"], columns["conf"], strict=True):
                    pred[i, v], conf[i, v] = p, c

    def __call__(self, images: Sequence[Image.Image | torch.Tensor] | torch.Tensor) -> list[Answer]:
        """Each image's :class:`Answer`, batched across images (each taken by :func:`zoomeval.policy.tta.as_image`
        and decoded by :meth:`decoded`): PIL images, uint8 tensors ``(C, H, W)`` or a batch tensor ``(N, C, H, W)``."""
        if isinstance(images, torch.Tensor) and images.dim() != 4:
            raise ValueError(f"a batch tensor is (N, C, H, W), this one has shape {tuple(images.shape)}")
        images = [self.decoded(as_image(image, f"image {i}"), f"image {i}") for i, image in enumerate(images)]
        n, k, rule = len(images), len(self.views), self.policy["rule"]
        pred, conf = np.zeros((n, k), np.int64), np.zeros((n, k), np.float32)  # views never run stay 0
        cut: dict[int, dict[int, np.ndarray]] = {}
        if rule["name"] == "cascade":
            tau = np.inf if rule["tau"] is None else float(rule["tau"])
            active = np.arange(n)
            for v in range(k):  # a round per view, over the images still below tau
                self._run(images, [(int(i), v) for i in active], pred, conf, cut)
                active = active[conf[active, v].astype(np.float64) < tau]
                for i in set(cut) - set(active.tolist()):
                    del cut[i]  # a stopped image's resized scales are not needed again
        else:
            self._run(images, [(i, v) for i in range(n) for v in range(k)], pred, conf, cut)
        chosen, passes = self.choose(Views(pred, conf, None, [Transform(*v) for v in self.views]))
        return [Answer(int(pred[i, c]), float(conf[i, c]), self.views[c], int(passes[i])) for i, c in enumerate(chosen)]

    def choose(self, views: Views) -> tuple[np.ndarray, np.ndarray]:
        """Each image's view (position in the policy's order) and passes, by the policy's rule on ``views``."""
        rule, every = self.policy["rule"], list(range(len(self.views)))
        full = np.full(views.n_images, len(every))
        if rule["name"] == "cascade":
            return choose_cascade(views, every, np.inf if rule["tau"] is None else rule["tau"], len(every))
        if rule["name"] == "vote":
            return choose_vote(views, every), full
        if rule["name"] == "selector":
            fitted = Selector(*(tuple(rule[key]) for key in ("mean", "scale", "coef")), rule["intercept"])
            return choose_selector(views, every, fitted), full
        return choose_max_conf(views, every), full


def study_classifier(
    document: Mapping[str, Any],
    resources: str | os.PathLike[str],
    device: str = "cpu",
    batch_size: int = 64,
    fetch: bool = True,
    module: torch.nn.Module | None = None,
) -> Classifier:
    """The classifier a policy was fitted for, loaded as ``zoomeval audit`` loads a study's model: its recorded
    entry (:func:`zoomeval.inference.recorded.recorded_model`: nothing it records becomes a path or a download), the
    weights under ``resources`` (a library's tag fetched there if missing and ``fetch``) checked against their
    sha256, the study's class set and precision. With ``module`` (a user's network, on its own device), that
    network in place of the one loaded, as :func:`same_network` allows."""
    from zoomeval.core.config import InferenceSettings
    from zoomeval.inference.models import load_model
    from zoomeval.inference.recorded import recorded_model

    model = document["model"]
    spec, folder = recorded_model(model["entry"], str(resources), fetch, "the policy's model")
    loaded = load_model(spec, folder)
    if module is not None:
        loaded = replace(loaded, module=same_network(module, loaded.module))
        device = str(next(module.parameters()).device)  # where the user put it
    settings = InferenceSettings(
        batch_size=batch_size,
        device=device,
        num_workers=0,
        precision=model["precision"],
        resize_backend="pil",
        channels_last=bool(model["channels_last"]),
    )
    return Classifier(spec, settings, model["class_indices"], loaded=loaded)


def same_network(module: torch.nn.Module, recorded: torch.nn.Module) -> torch.nn.Module:
    """``module``, refused unless it is in eval mode and its parameters and buffers (``state_dict`` tensors: what
    :func:`parameters_sha256` digests) have ``recorded``'s names, dtypes, shapes and values, naming the first that
    differs; ``recorded`` is the policy's model, loaded from its verified weights."""
    if training := [name or "the module" for name, part in module.named_modules() if part.training]:
        raise ValueError(f"{training[0]} is in training mode (dropout, batch statistics): call model.eval() first")
    own, theirs = (
        {k: v.detach() for k, v in m.state_dict().items() if isinstance(v, torch.Tensor)} for m in (module, recorded)
    )
    for name in sorted(own.keys() | theirs.keys()):
        if name not in theirs or name not in own:
            where = "this module" if name in own else "the policy's model"
            raise ValueError(f"this module is not the policy's model: {name} is in {where} only")
        a, b = own[name].cpu(), theirs[name]
        if (a.dtype, a.shape) != (b.dtype, b.shape):
            raise ValueError(
                f"this module is not the policy's model: its {name} is {a.dtype} {tuple(a.shape)}, the policy's "
                f"model's {b.dtype} {tuple(b.shape)}"
            )
        if not torch.equal(a, b):
            raise ValueError(
                f"this module is not the policy's model: its {name} has other values than the policy's verified "
                "weights (fine-tuned, edited, or BatchNorm statistics updated in training mode)"
            )
    return module


def study_resources(weights: str | os.PathLike[str]) -> Path:
    """The resources folder of ``weights``: a study directory's ``resources/``, or ``weights`` itself."""
    return Path(weights) / "resources" if (Path(weights) / "resources").is_dir() else Path(weights)


def as_image(image: Image.Image | torch.Tensor, where: str) -> Image.Image:
    """A PIL image as given, or a ``torch.uint8`` tensor ``(C, H, W)`` (C 1 to 4) as the PIL image of its pixels
    (grey, grey and alpha, RGB, RGBA: decoded then as PIL images of those modes are); anything else is refused
    naming ``where``."""
    if isinstance(image, Image.Image):
        return image
    tensor = isinstance(image, torch.Tensor)
    if not (tensor and image.dtype == torch.uint8 and image.dim() == 3 and 1 <= image.shape[0] <= 4):
        what = f"a {image.dtype} tensor of shape {tuple(image.shape)}" if tensor else f"a {type(image).__name__}"
        raise ValueError(f"{where} is {what}; expected a PIL image or a torch.uint8 tensor (C, H, W), C 1 to 4")
    pixels = image.permute(1, 2, 0).cpu().numpy()
    return Image.fromarray(pixels[:, :, 0] if image.shape[0] == 1 else pixels)
