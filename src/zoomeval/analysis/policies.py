"""Zoom without an oracle: label-free policies that answer from a few of the 324 views, fitted on calibration images
and scored on held-out ones.

Every policy answers an image with one of its views (that view's ``pred``), chosen from the model's outputs alone
(``pred``, ``conf``, the transform); the labels (:attr:`Views.correct`) are read to fit a policy on calibration
images and to score its answers on test images, never to choose. Policies, for a budget of k views:

* ``max_conf``: a fixed set of k transforms, answer = the most confident view. The set starts with the 1-crop view
  and grows greedily, each step adding the transform that most raises this rule's accuracy on calibration images;
* ``max_conf_cover``: the same rule on the 1-crop view followed by the greedy cover (on calibration images) of the
  images the 1-crop misses: the paper's picks, for comparison;
* ``vote``: a fixed set grown as ``max_conf``'s, for its own rule: the most frequent ``pred`` among the k views,
  ties to the class with the more confident view;
* ``cascade``: views in ``max_conf``'s order, stopping at the first with ``conf >= tau`` (else after ``length``
  views, answering the most confident); ``tau`` and ``length`` are chosen on calibration images as the most accurate
  pair whose average forward passes there stay within the budget;
* ``selector``: a logistic regression fitted on calibration images to score each view of ``max_conf``'s set from
  label-free features (:data:`FEATURES`), answer = the best-scored view.

Sets of more views than the largest budget below the number of transforms are completed with the remaining
transforms by calibration accuracy (all transforms: every set is the same views). Every tie goes to the earlier view
in the set's order, and the greedy steps' ties to the authors' transform order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from zoomeval.analysis.cover import greedy_cover
from zoomeval.core.zoom import ONE_CROP, Transform

#: The label-free policies, in the table's order.
POLICIES = ("max_conf", "max_conf_cover", "vote", "cascade", "selector")
#: The rules a policy file carries (zoomeval policy save), each applied as here: every policy but the paper's
#: picks, max_conf_cover, which is there for comparison.
RULES = tuple(p for p in POLICIES if p != "max_conf_cover")
#: The selector's features of a view: its conf, log2(S / 256), anchor steps from the centre, agreement with the
#: 1-crop view's pred, and the share of the set's views that predict its class.
FEATURES = ("conf", "log2_scale", "anchor_distance", "agrees_1crop", "vote_share")
#: Images processed at a time where a step needs a few arrays of every (image, view) pair of a large set.
CHUNK_IMAGES = 8192
#: Quantiles of the calibration images' 1-crop conf tried as the cascade's threshold (and never stopping early).
TAU_QUANTILES = np.linspace(0, 1, 41)


@dataclass(frozen=True)
class Views:
    """The views of some images under one model: ``pred`` (int), ``conf`` (float) and ``correct`` (bool), each
    ``(n_images, len(order))``. ``correct`` holds the labels: fitting reads it, choosing never does."""

    pred: np.ndarray
    conf: np.ndarray
    #: None once :meth:`unlabelled`: what a policy is applied to
    correct: np.ndarray | None
    order: list[Transform]

    def subset(self, images: np.ndarray) -> Views:
        correct = None if self.correct is None else self.correct[images]
        return Views(self.pred[images], self.conf[images], correct, self.order)

    def unlabelled(self) -> Views:
        """The same views without their labels."""
        return replace(self, correct=None)

    @property
    def n_images(self) -> int:
        return self.conf.shape[0]


@dataclass(frozen=True)
class Selector:
    """A fitted selector: features are standardised with ``mean`` and ``scale``, then scored by ``coef`` and
    ``intercept`` (the logistic regression's log-odds of the view being right)."""

    mean: tuple[float, ...]
    scale: tuple[float, ...]
    coef: tuple[float, ...]
    intercept: float


@dataclass(frozen=True)
class Policy:
    """What fitting on calibration images learns; applying it reads no label."""

    #: transform indices in order: max_conf's, max_conf_cover's and vote's sets (a budget of k takes the first k)
    max_conf: list[int]
    cover: list[int]
    vote: list[int]
    #: budget -> (tau, length) of the cascade over max_conf's order
    cascade: dict[int, tuple[float, int]] = field(default_factory=dict)
    #: budget -> the selector over max_conf's first k views
    selector: dict[int, Selector] = field(default_factory=dict)


def _labels(views: Views) -> np.ndarray:
    """The labels a fit reads (calibration views only)."""
    if views.correct is None:
        raise ValueError("fitting a policy needs labelled calibration views")
    return views.correct


def start_view(order: list[Transform]) -> int:
    """The view every set starts with: the 1-crop transform (the first transform where 256 is not a scale)."""
    one = Transform(*ONE_CROP)
    return order.index(one) if one in order else 0


def greedy_set(views: Views, size: int, vote: bool) -> list[int]:
    """The ``max_conf`` (or with ``vote`` the ``vote``) set of ``size`` transforms on calibration ``views``: the 1-crop
    view, then at each step the transform whose addition makes the rule right on the most images."""
    start = start_view(views.order)
    search = _VoteSearch(views, start) if vote else _MaxConfSearch(views, start)
    chosen = [start]
    while len(chosen) < size:
        gain = search.gains()  # images each candidate would make right minus those it would make wrong
        gain[chosen] = np.iinfo(np.int64).min
        best = int(np.argmax(gain))  # the first maximum: the authors' transform order
        chosen.append(best)
        search.add(best)
    return chosen


def _gains(new: np.ndarray, correct: np.ndarray, key: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Per candidate, over these images: (correct - right) where its key ``new`` beats the answer's ``key``."""
    better = new > key[:, None]
    return np.count_nonzero(better & correct, axis=0) - np.count_nonzero(better[right], axis=0)


def _parts(images: np.ndarray) -> list[np.ndarray]:
    """``images`` in runs of :data:`CHUNK_IMAGES`: the temporaries of a run of (image, view) pairs stay small."""
    return [images[k : k + CHUNK_IMAGES] for k in range(0, len(images), CHUNK_IMAGES)]


class _MaxConfSearch:
    """``max_conf``'s greedy state: each image's answer (the conf ``key`` of its most confident chosen view and
    whether that view is right) and every candidate's gain, summed over images. Adding a view changes the answer
    only of the images where it wins (conf above the key), so only their terms are taken out and put back: the
    gains are sums of integers, the same as a recount over every image."""

    def __init__(self, views: Views, start: int) -> None:
        self.conf, self.correct = views.conf, _labels(views)
        self.key, self.right = self.conf[:, start].copy(), self.correct[:, start].copy()
        self.gain = self._terms(np.arange(views.n_images))

    def _terms(self, images: np.ndarray) -> np.ndarray:
        return sum(
            (_gains(self.conf[p], self.correct[p], self.key[p], self.right[p]) for p in _parts(images)),
            np.zeros(self.conf.shape[1], np.int64),
        )

    def gains(self) -> np.ndarray:
        return self.gain.copy()

    def add(self, best: int) -> None:
        wins = np.flatnonzero(self.conf[:, best] > self.key)
        self.gain -= self._terms(wins)
        self.key[wins], self.right[wins] = self.conf[wins, best], self.correct[wins, best]
        self.gain += self._terms(wins)


class _VoteSearch:
    """``vote``'s greedy state: per image, the views chosen so far of each of its classes (``count``) and their highest
    conf (``class_conf``), both flat arrays with a slot per (image, class) (``at``: each view's slot, by
    :func:`class_slots`), the answer's slot and vote key, whether it is right, and the most views of another class.

    An image whose runner-up is two or more views behind the answer's ``c`` is settled: one more view raises another
    class to at most ``c - 1`` views, whose key is at most ``c - 1/2`` (conf <= 1), under the answer's (at least
    ``c``); and a view of the answer's class keeps the answer's correctness (a view is right by its class). Every
    candidate gains exactly 0 there, so the gains are summed over the other images only; adding a view updates one
    slot per image, its class's."""

    def __init__(self, views: Views, start: int) -> None:
        self.conf, self.correct, n = views.conf, _labels(views), views.n_images
        if n and not 0 <= self.conf.min() <= self.conf.max() <= 1:
            raise ValueError("the vote orders views by count + conf / 2: conf must lie in [0, 1]")
        slots, self.n_slots = class_slots(views.pred)
        index = np.int32 if n * self.n_slots < 2**31 else np.int64
        self.at = slots + (np.arange(n, dtype=index) * self.n_slots)[:, None]
        self.count = np.zeros(n * self.n_slots, np.int16)
        self.class_conf = np.zeros(n * self.n_slots, np.result_type(np.float32, self.conf.dtype))
        first = self.at[:, start]
        self.count[first], self.class_conf[first] = 1, self.conf[:, start].astype(np.float32)
        self.answer, self.runner_up = first, np.zeros(n, np.int16)
        self.key, self.right = _vote_key(self.count[first], self.conf[:, start]), self.correct[:, start]

    def gains(self) -> np.ndarray:
        active = np.flatnonzero(self.runner_up >= self.count[self.answer] - 1)
        gain = np.zeros(self.conf.shape[1], np.int64)
        for p in _parts(active):
            at = self.at[p]
            top = np.maximum(np.take(self.class_conf, at), self.conf[p])
            gain += _gains(_vote_key(np.take(self.count, at) + 1, top), self.correct[p], self.key[p], self.right[p])
        return gain

    def add(self, best: int) -> None:
        at = self.at[:, best]
        count, top = self.count[at] + 1, np.maximum(self.class_conf[at], self.conf[:, best])
        self.count[at], self.class_conf[at] = count, top
        new = _vote_key(count, top)
        wins = new > self.key  # always where the view is of the answer's class
        self.key, self.right = np.where(wins, new, self.key), np.where(wins, self.correct[:, best], self.right)
        overtaken = np.flatnonzero(wins & (at != self.answer))  # another class leads now
        self.answer = np.where(wins, at, self.answer)
        self.runner_up = np.where(wins, self.runner_up, np.maximum(self.runner_up, count))
        counts = self.count.reshape(-1, self.n_slots)[overtaken]
        counts[np.arange(len(overtaken)), self.answer[overtaken] % self.n_slots] = 0
        self.runner_up[overtaken] = counts.max(axis=1, initial=0)


def _vote_key(count: np.ndarray, conf: np.ndarray) -> np.ndarray:
    """The vote's order of views: more views of the same class first, then the more confident (conf is in [0, 1])."""
    return count + 0.5 * conf


def cover_set(views: Views) -> list[int]:
    """``max_conf_cover``'s order: the 1-crop view, then the greedy cover of the calibration images it misses."""
    start, correct = start_view(views.order), _labels(views)
    missed = correct.T[:, ~correct[:, start]]
    return [start, *(p.index for p in greedy_cover(missed) if p.index != start)]


def complete(chosen: list[int], views: Views) -> list[int]:
    """``chosen`` followed by the other transforms, the most accurate on the calibration images first."""
    accuracy, taken = _labels(views).mean(axis=0), set(chosen)
    return [*chosen, *(int(t) for t in np.argsort(-accuracy, kind="stable") if t not in taken)]


def choose_max_conf(views: Views, chosen: Sequence[int]) -> np.ndarray:
    """Each image's view under ``max_conf``: the most confident of ``chosen`` (the first on a tie)."""
    return np.asarray(chosen)[np.argmax(views.conf[:, chosen], axis=1)]


def choose_vote(views: Views, chosen: Sequence[int]) -> np.ndarray:
    """Each image's view under ``vote``: the most confident view of the class most of ``chosen`` predict (ties: the
    class with the more confident view, then the earlier view)."""
    out = np.empty(views.n_images, dtype=np.int64)
    for start in range(0, views.n_images, CHUNK_IMAGES):
        part = slice(start, start + CHUNK_IMAGES)
        key = _vote_key(class_counts(views.pred[part][:, chosen]), views.conf[part][:, chosen])
        out[part] = np.asarray(chosen)[np.argmax(key, axis=1)]
    return out


def class_counts(pred: np.ndarray) -> np.ndarray:
    """``(n, k)``: how many of its row's k views predict each view's class."""
    n, k = pred.shape
    code = pred.astype(np.int64) + (np.arange(n, dtype=np.int64) << 16)[:, None]  # one code per (row, class)
    _, inverse, counts = np.unique(code.ravel(), return_inverse=True, return_counts=True)
    return counts[inverse].reshape(n, k)


def class_slots(pred: np.ndarray) -> tuple[np.ndarray, int]:
    """``(n, k)`` each view's class numbered within its row (0, 1, ... in class order), and the most classes of a
    row; :data:`CHUNK_IMAGES` rows at a time (a stable sort of small integers is a radix sort)."""
    slots = np.empty(pred.shape, np.int16)
    for start in range(0, pred.shape[0], CHUNK_IMAGES):
        part = pred[start : start + CHUNK_IMAGES]
        order = np.argsort(part, axis=1, kind="stable")
        ranked = np.take_along_axis(part, order, axis=1)
        run = np.zeros(part.shape, np.int16)
        np.cumsum(ranked[:, 1:] != ranked[:, :-1], axis=1, out=run[:, 1:])
        np.put_along_axis(slots[start : start + CHUNK_IMAGES], order, run, axis=1)
    return slots, int(slots.max(initial=0)) + 1


def cascade_passes(views: Views, chosen: Sequence[int], taus: np.ndarray) -> np.ndarray:
    """``(n_images, len(taus))``: the views a cascade over ``chosen`` looks at before one has ``conf >= tau`` (all of
    ``chosen`` when none does). The running maximum of conf is sorted per image, so one search answers every tau."""
    peak = np.maximum.accumulate(views.conf[:, chosen].astype(np.float64), axis=1)
    k = peak.shape[1]
    offset = 2.0 * np.arange(views.n_images)[:, None]  # conf <= 1 < 2: the rows' ranges never overlap
    below = np.searchsorted((peak + offset).ravel(), (taus[None] + offset).ravel()).reshape(-1, len(taus))
    return np.minimum(below - k * np.arange(views.n_images)[:, None], k - 1) + 1


def prefix_choice(views: Views, chosen: Sequence[int]) -> np.ndarray:
    """``(n_images, len(chosen))``: the most confident of the first j + 1 views of ``chosen`` (the earlier on a tie)."""
    conf = views.conf[:, chosen]
    peak = np.maximum.accumulate(conf, axis=1)
    rising = np.concatenate([np.ones((conf.shape[0], 1), bool), conf[:, 1:] > peak[:, :-1]], axis=1)
    position = np.maximum.accumulate(np.where(rising, np.arange(conf.shape[1]), 0), axis=1)
    return np.asarray(chosen)[position]


def choose_cascade(views: Views, chosen: Sequence[int], tau: float, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Each image's view and forward passes under a cascade over the first ``length`` views of ``chosen``."""
    passes = cascade_passes(views, chosen[:length], np.array([tau]))[:, 0]
    picked = prefix_choice(views, chosen[:length])
    return picked[np.arange(views.n_images), passes - 1], passes


def fit_cascade(views: Views, chosen: Sequence[int], budgets: Sequence[int]) -> dict[int, tuple[float, int]]:
    """Per budget, the (tau, length) whose cascade is the most accurate on the calibration ``views`` with at most that
    many forward passes per image on average (ties: fewer passes)."""
    one = start_view(views.order)
    taus = np.unique(np.r_[np.quantile(views.conf[:, one], TAU_QUANTILES), np.inf])
    right = _labels(views)[np.arange(views.n_images)[:, None], prefix_choice(views, chosen)]
    options = []  # (accuracy, -passes, tau, length)
    lengths = sorted({min(b, len(chosen)) for b in budgets})
    longest = cascade_passes(views, chosen[: lengths[-1]], taus)  # a shorter one stops there too, or at its end
    for length in lengths:
        passes = np.minimum(longest, length)
        hits = np.take_along_axis(right, passes - 1, axis=1)
        options += zip(hits.mean(axis=0), -passes.mean(axis=0), taus, [length] * len(taus), strict=True)
    fitted = {}
    for budget in budgets:
        fits = [o for o in options if -o[1] <= budget + 1e-9]
        best = max(fits, key=lambda o: (o[0], o[1], -o[3]))
        fitted[budget] = (float(best[2]), int(best[3]))
    return fitted


def features(views: Views, chosen: Sequence[int]) -> np.ndarray:
    """``(n_images, len(chosen), len(FEATURES))`` label-free features of each image's views of ``chosen``."""
    pred = views.pred[:, chosen]
    shape = pred.shape
    transforms = [views.order[t] for t in chosen]
    log_scale = np.broadcast_to([np.log2(t.scale / 256) for t in transforms], shape)
    distance = np.broadcast_to([abs(t.row - 1) + abs(t.col - 1) for t in transforms], shape)
    agrees = pred == views.pred[:, [start_view(views.order)]]
    columns = [views.conf[:, chosen], log_scale, distance, agrees, class_counts(pred) / len(chosen)]
    return np.stack(columns, axis=2).astype(np.float32)


def fit_selector(views: Views, chosen: Sequence[int], max_rows: int, seed: int) -> Selector:
    """A logistic regression of "the view is right" on :data:`FEATURES` of ``chosen``'s views of the calibration
    images (at most ``max_rows`` image-view pairs, sampled with ``seed``). Where every sampled view is right or every
    one is wrong there is nothing to learn: the selector is ``max_conf``'s rule (conf alone)."""
    from sklearn.linear_model import LogisticRegression

    n_sample = min(views.n_images, max(1, max_rows // len(chosen)))
    sample = np.sort(np.random.default_rng(seed).choice(views.n_images, n_sample, replace=False))
    x = features(views.subset(sample), chosen).reshape(-1, len(FEATURES))
    y = _labels(views)[sample][:, chosen].ravel()
    mean, scale = x.mean(axis=0), x.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    if len(np.unique(y)) < 2:
        coef, intercept = np.eye(len(FEATURES))[0], 0.0
    else:
        model = LogisticRegression(C=1.0, max_iter=1000).fit((x - mean) / scale, y)
        coef, intercept = model.coef_[0], float(model.intercept_[0])
    return Selector(tuple(map(float, mean)), tuple(map(float, scale)), tuple(map(float, coef)), intercept)


def choose_selector(views: Views, chosen: Sequence[int], selector: Selector) -> np.ndarray:
    """Each image's view under a fitted selector: the best-scored of ``chosen`` (the earlier on a tie)."""
    out = np.empty(views.n_images, dtype=np.int64)
    weights = np.asarray(selector.coef) / np.asarray(selector.scale)
    for start in range(0, views.n_images, CHUNK_IMAGES):
        part = np.arange(start, min(start + CHUNK_IMAGES, views.n_images))
        score = features(views.subset(part), chosen) @ weights
        out[part] = np.asarray(chosen)[np.argmax(score, axis=1)]
    return out


def fit(views: Views, budgets: Sequence[int], max_rows: int, seed: int) -> Policy:
    """Every policy fitted on the calibration ``views`` for ``budgets`` (numbers of views, each at most the number of
    transforms)."""
    n_t = len(views.order)
    grown = max([b for b in budgets if b < n_t], default=1)
    max_conf = complete(greedy_set(views, grown, vote=False), views)
    vote = complete(greedy_set(views, grown, vote=True), views)
    policy = Policy(max_conf, complete(cover_set(views), views)[:n_t], vote)
    policy.cascade.update(fit_cascade(views, max_conf, budgets))
    policy.selector.update({b: fit_selector(views, max_conf[:b], max_rows, seed) for b in budgets if b > 1})
    return policy


def apply(policy: Policy, views: Views, budgets: Sequence[int]) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """``(policy, budget) -> (view chosen, forward passes)`` per image of ``views``, which carry no labels."""
    if views.correct is not None:
        raise ValueError("a policy is applied to unlabelled views (Views.unlabelled)")
    out = {}
    for b in budgets:
        passes = np.full(views.n_images, b)
        out["max_conf", b] = choose_max_conf(views, policy.max_conf[:b]), passes
        out["max_conf_cover", b] = choose_max_conf(views, policy.cover[:b]), passes
        out["vote", b] = choose_vote(views, policy.vote[:b]), passes
        out["cascade", b] = choose_cascade(views, policy.max_conf, *policy.cascade[b])
        selector = policy.selector.get(b)
        chosen = policy.max_conf[:b]
        out["selector", b] = (
            choose_selector(views, chosen, selector) if selector else choose_max_conf(views, chosen),
            passes,
        )
    return out
