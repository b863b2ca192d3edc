"""The results layout, declared once: every file or folder the workflow writes under a results root, as a named
template with Snakemake-style ``{wildcards}``, with its parser.

The rule files, the leaderboard, the study index, the browser and the generated output reference
(``docs/reference/outputs.md``) all take their paths from here; nothing else spells out a ``results/`` path.
A study's results root is ``results`` unless the config says otherwise (a limited smoke-test run keeps its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

#: The default results root, relative to the study directory.
RESULTS = "results"
#: Logs, relative to the study directory (one per job, mirroring the results' names).
LOGS = "logs"

_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Output:
    """One output: its template under the results root and what it holds (one line, for the reference)."""

    name: str
    template: str
    what: str

    @property
    def wildcards(self) -> tuple[str, ...]:
        return tuple(_FIELD.findall(self.template))


def _outputs(*entries: tuple[str, str, str]) -> dict[str, Output]:
    return {name: Output(name, template, what) for name, template, what in entries}


#: Every output, by name. Templates are relative to the results root.
OUTPUTS = _outputs(
    ("manifest", "datasets/{dataset}/manifest.parquet", "one row per image: id, path, labels, size, boxes"),
    ("bad_images", "datasets/{dataset}/bad_images.csv", "the images that could not be decoded, with the error"),
    ("images", "datasets/{dataset}/images", "images an adapter writes (the demo, ImageNet-Hard)"),
    ("labels", "labels/{dataset}/{labels_file}", "a label set's per-image labels"),
    ("masks", "masks/{dataset}/{method}.parquet", "object masks per image (boxes or Segment Anything)"),
    ("contact_sheet", "masks/{dataset}/{method}_contact_sheet.png", "the masks over a sample of images"),
    ("zero_shot_head", "zero_shot/{head}.safetensors", "an open_clip model's zero-shot classifier head"),
    ("predictions", "predictions/{dataset}/{variant}/{model}.parquet", "top-k per image and zoom transform"),
    ("aggregates", "predictions/{dataset}/{variant}/{model}.aggregates.parquet", "views averaged per image"),
    ("standard", "standard/{dataset}/{model}.parquet", "the standard (resize + centre crop) evaluation"),
    ("tta", "tta/{dataset}/{method}/{model}.parquet", "test-time augmentation predictions"),
    ("metrics", "analysis/{scored}/{variant}/{model}/metrics.json", "1-crop, upper-bound and cover metrics"),
    ("cover", "analysis/{scored}/{variant}/{model}/cover.json", "the greedy and exact set covers"),
    ("correct", "analysis/{scored}/{variant}/{model}/correct.npz", "the image x transform correctness matrix"),
    ("policies", "policies/{scored}/{variant}/{model}.json", "label-free zoom policies, cross-validated"),
    ("policy_transfer", "policies/transfer/{source}/{scored}/{variant}/{model}.json", "policies moved across"),
    ("hard", "hard/{scored}.parquet", "the images no transform classifies correctly"),
    ("object_counts", "stats/object_counts/{dataset}.parquet", "objects per image (Mann-Whitney U's input)"),
    ("table", "{table}.{ext}", "a table as CSV or Markdown (table_a8, table_1, ...)"),
    ("study_index", "study.json", "the sealed study index: every finished result, its sha256 and key"),
)


def _fill(template: str, wildcards: dict[str, object]) -> str:
    """``template`` with the given wildcards filled in and the others left as ``{name}`` (for Snakemake)."""
    unknown = set(wildcards) - set(_FIELD.findall(template))
    if unknown:
        raise KeyError(f"{template}: no wildcard {sorted(unknown)}")
    return _FIELD.sub(lambda m: str(wildcards[m[1]]) if m[1] in wildcards else m[0], template)


@dataclass(frozen=True)
class Layout:
    """The outputs under one results root (``results`` unless a config names another)."""

    root: str = RESULTS

    def path(self, name: str, **wildcards: object) -> str:
        """The path of output ``name`` (``metrics``, ...), relative to the study directory; wildcards not given stay
        ``{name}`` for Snakemake to fill."""
        return str(PurePosixPath(self.root) / _fill(OUTPUTS[name].template, wildcards))

    def parse(self, name: str, path: str) -> dict[str, str] | None:
        """The wildcards of ``path`` as output ``name`` (relative to the study directory), or None if it is not one."""
        pattern = re.escape(str(PurePosixPath(self.root) / OUTPUTS[name].template))
        regex = re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m[1]}>[^/]+)", pattern)
        match = re.fullmatch(regex, str(PurePosixPath(path)))
        return None if match is None else match.groupdict()


def run_roots(limit: int | None) -> tuple[str, str]:
    """The results and logs roots of a run: :data:`RESULTS` and :data:`LOGS`, or for a run limited to the first
    ``limit`` images of each dataset (config key ``limit``) folders of its own under them, so that a smoke test never
    overwrites or mixes with the full results."""
    if limit is None:
        return RESULTS, LOGS
    return f"{RESULTS}/limit-{limit}", f"{LOGS}/limit-{limit}"
