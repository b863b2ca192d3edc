"""One prediction per image from a group of views: the aggregation table of Taesiri et al. 2023.

Methods, each a group of views of one image:

* ``zoom_in``, ``zoom_out``, ``zoom_224``: every zoom transform with S > 224, S < 224, S = 224
  (:data:`zoomeval.core.zoom.ZOOM_GROUPS`; all nine anchors);
* ``five_crop``: the standard 5-crop of the image resized to S = 256, i.e. the four 224 crops flush with
  its corners (torchvision's ``FiveCrop``) and, as the centre crop, the 1-crop transform ``LOC:1_1_Size:256``
  (which sits within two pixels of torchvision's centre crop), so 5-crop always contains the 1-crop view;
* ``ten_crop``: those five and their horizontal mirror images (Krizhevsky et al. 2012).

The authors' code defines neither 5-crop nor 10-crop; this is the standard reading. Which views each method averages
is :attr:`zoomeval.core.zoom.ZoomGrid.membership`. The four corner crops and five mirror images are extra views
(:func:`zoomeval.core.zoom.all_crops` with ``extra_views``): nine more forward passes per image, 2.8% of 324.

Rules: ``max`` takes the prediction of the view with the highest softmax probability (ties go to the first
view: transforms in :func:`zoomeval.core.zoom.transforms` order, then the extra views); ``mean`` averages the
softmax vectors of the views and takes the argmax. Both use the softmax over the dataset's class set, as
the prediction file's ``conf`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import torch

from zoomeval.core.layout import declare

#: Version of the aggregates Parquet layout (the columns below).
SCHEMA_VERSION = 1
FIELDS = [
    pa.field("image_id", pa.dictionary(pa.int32(), pa.string())),
    pa.field("method", pa.dictionary(pa.int8(), pa.string())),
    pa.field("pred_max", pa.int16()),
    pa.field("conf_max", pa.float32()),
    pa.field("pred_mean", pa.int16()),
    pa.field("conf_mean", pa.float32()),
]
declare("aggregates", FIELDS, SCHEMA_VERSION)


class MeanSoftmax:
    """Running sums, on the model's device, of the softmax vectors of each (image, method) of a shard whose crops come
    in order: image by image, every image's ``len(members)`` views in order. Crop ``p`` of that sequence is view
    ``p % n_views`` of image ``p // n_views``, so the sums need no index from the host: what they use is built on
    the device once."""

    def __init__(self, n_images: int, members: torch.Tensor, n_classes: int) -> None:
        """``members``: :attr:`zoomeval.core.zoom.ZoomGrid.membership`'s matrix on the device, as floats."""
        device, (n_views, n_methods) = members.device, members.shape
        self.n_views = n_views
        self.sums = torch.zeros(n_images, n_methods, n_classes, device=device)
        positions = torch.arange(n_images * n_views, device=device)
        self.image = positions // n_views
        self.weights = members[positions % n_views].T  # (methods, crops): which methods average crop p
        self.local = torch.arange(n_images, device=device)
        self.counts = members.sum(dim=0)

    def add(self, start: int, probs: torch.Tensor) -> None:
        """Add the softmax vectors ``probs`` of crops ``start``, ``start + 1``, ... of the sequence."""
        stop = start + len(probs)
        first, last = start // self.n_views, (stop - 1) // self.n_views + 1
        # weights[j, m, b] = 1 where crop b is a view of image first + j that method m averages; a matrix product
        # (deterministic, unlike index_add_ on CUDA) then sums each group's vectors.
        one_hot = self.image[None, start:stop] == self.local[first:last, None]
        weights = one_hot[:, None, :] * self.weights[None, :, start:stop]
        summed = weights.reshape((last - first) * self.weights.shape[0], len(probs)) @ probs.float()
        self.sums[first:last] += summed.reshape(last - first, self.weights.shape[0], -1)

    def predictions(self, class_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``mean`` rule's ``(pred, conf)``, each ``(n_images, n_methods)``, on the device: the argmax of each
        group's mean softmax (``class_indices`` maps its columns to ImageNet classes) and its probability."""
        conf, arg = (self.sums / self.counts[None, :, None]).max(dim=2)
        return class_indices[arg].to(torch.int16), conf


def aggregate(
    image_ids: Sequence[str],
    methods: Sequence[str],
    members: np.ndarray,
    pred: np.ndarray,
    conf: np.ndarray,
    mean_pred: np.ndarray,
    mean_conf: np.ndarray,
) -> pa.Table:
    """The aggregates of one shard: a row per (image, method), images in order, then methods.

    ``pred`` and ``conf`` are ``(n_images, n_views)`` (every view's prediction and softmax probability),
    ``mean_pred`` and ``mean_conf`` the ``mean`` rule's, :meth:`MeanSoftmax.predictions` on the host.
    """
    n_images, n_methods = len(image_ids), len(methods)
    masked = np.where(members.T[None], conf[:, None, :], -np.inf)  # (image, method, view)
    best = masked.argmax(axis=2)  # the first view with the highest probability
    data = {
        "image_id": pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(n_images, dtype=np.int32), n_methods)), pa.array(list(image_ids))
        ),
        "method": pa.DictionaryArray.from_arrays(
            pa.array(np.tile(np.arange(n_methods, dtype=np.int8), n_images)), pa.array(list(methods))
        ),
        "pred_max": np.take_along_axis(pred, best, axis=1).ravel().astype(np.int16),
        "conf_max": np.take_along_axis(conf, best, axis=1).ravel().astype(np.float32),
        "pred_mean": mean_pred.ravel().astype(np.int16),
        "conf_mean": mean_conf.ravel().astype(np.float32),
    }
    return pa.table(data, schema=pa.schema(FIELDS))
