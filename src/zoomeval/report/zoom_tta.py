"""A fitted label-free zoom policy (a file of ``zoomeval policy export``, :mod:`zoomeval.report.policy_export`) as a
test-time wrapper of a classifier: :class:`ZoomTTA` cuts the study's own crops of the policy's views
(:func:`zoomeval.core.zoom.all_crops`, the predict job's host path), runs only the forward passes the policy needs
(a cascade stops per image at the first view with ``conf >= tau``) and answers each image by the rule of
:mod:`zoomeval.analysis.policies`, applied to the outputs it computed."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import torch
from PIL import Image

from zoomeval.analysis.policies import Selector, Views, choose_cascade, choose_max_conf, choose_selector, choose_vote
from zoomeval.core.io import read_json
from zoomeval.core.zoom import Transform, all_crops
from zoomeval.inference.classifier import Classifier

#: Version of a policy file's layout.
SCHEMA_VERSION = 1
KIND = "zoom_policy"
#: The rules a policy file can name, each :mod:`zoomeval.analysis.policies`' choice of the same name.
RULES = ("max_conf", "vote", "cascade", "selector")


class Answer(NamedTuple):
    """One image's answer: the class index (of the model's 1000, in the dataset's class set), its softmax
    confidence over that set, the view that gave it as ``(scale, row, col)`` and the forward passes spent."""

    label: int
    confidence: float
    view: tuple[int, int, int]
    passes: int


def read_policy(policy: str | os.PathLike[str] | Mapping[str, Any]) -> dict[str, Any]:
    """A policy file (or its parsed document), refused unless it is one this version reads."""
    document = dict(policy) if isinstance(policy, Mapping) else read_json(policy)
    where = "the policy" if isinstance(policy, Mapping) else str(policy)
    if document.get("kind") != KIND or document.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(
            f"{where}: not a zoom policy file of schema {SCHEMA_VERSION} (kind {document.get('kind')!r}, "
            f"schema_version {document.get('schema_version')!r}); export it again"
        )
    if not _well_formed(document):
        raise ValueError(f"{where}: its views, rule ({', '.join(RULES)}) or model are malformed; export it again")
    return document


#: The fitted parameters each rule reads, and what the wrapper reads of the model.
_RULE_KEYS = {
    "max_conf": set(),
    "vote": set(),
    "cascade": {"tau", "length"},
    "selector": {"mean", "scale", "coef", "intercept"},
}
_MODEL_KEYS = {"weights_sha256", "mean", "std", "crop_size", "crop_backend"}


def _well_formed(document: Mapping[str, Any]) -> bool:
    """Whether a policy document has views of three integers, a known rule with its parameters and its model's key."""
    try:
        views, rule, model = document["views"], document["rule"], document["model"]
        return (
            bool(views)
            and all(len(v) == 3 and all(isinstance(x, int) for x in v) for v in views)
            and _RULE_KEYS.get(rule["name"], {"?"}) <= rule.keys()
            and _MODEL_KEYS <= model.keys()
            and model["crop_backend"] in ("pil", "torch")
        )
    except (KeyError, TypeError, AttributeError):
        return False


def check_model(classifier: Classifier, document: Mapping[str, Any]) -> None:
    """Refuse a classifier other than the one the policy was fitted for: other weights (by sha256), or another
    normalisation of its inputs (the same weights fed otherwise give other confidences)."""
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


class ZoomTTA:
    """``classifier`` answering through a fitted zoom policy (a file of ``zoomeval policy export``, or its parsed
    document); refused unless the classifier has the policy's weights and normalisation. Build the classifier
    with the class set the study scored (``class_indices`` of its prediction file): the confidences, and so the
    choices, are softmaxes over that set."""

    def __init__(self, classifier: Classifier, policy: str | os.PathLike[str] | Mapping[str, Any]) -> None:
        self.policy = read_policy(policy)
        check_model(classifier, self.policy)
        self.classifier = classifier
        self.views = [tuple(int(x) for x in v) for v in self.policy["views"]]
        self.size, self.backend = int(self.policy["model"]["crop_size"]), self.policy["model"]["crop_backend"]

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
                self.classifier.check_finite(
                    self.classifier.finite(logits).cpu().numpy(),
                    lambda r, b=batch: f"view {self.views[b[r][1]]} of image {b[r][0]}",
                )
                columns = self.classifier.columns(logits)
                for (i, v), p, c in zip(batch, columns["pred"], columns["conf"], strict=True):
                    pred[i, v], conf[i, v] = p, c

    def __call__(self, images: Sequence[Image.Image]) -> list[Answer]:
        """Each image's :class:`Answer`, batched across images."""
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
) -> Classifier:
    """The classifier a policy was fitted for, loaded as ``zoomeval audit`` loads a study's model: its recorded
    entry (:func:`zoomeval.inference.recorded.recorded_model`: nothing it records becomes a path or a download), the
    weights under ``resources`` (a library's tag fetched there if missing and ``fetch``) checked against their
    sha256, the study's class set and precision."""
    from zoomeval.core.config import InferenceSettings
    from zoomeval.inference.recorded import recorded_model

    model = document["model"]
    spec, folder = recorded_model(model["entry"], str(resources), fetch, "the policy's model")
    settings = InferenceSettings(
        batch_size=batch_size,
        device=device,
        num_workers=0,
        precision=model["precision"],
        resize_backend="pil",
        channels_last=bool(model["channels_last"]),
    )
    return Classifier(spec, settings, model["class_indices"], folder)
