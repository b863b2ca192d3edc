"""The results layout, declared once: every file or folder the workflow writes under a results root, as a named
template with Snakemake-style ``{wildcards}``, with its parser; and every job's log under the logs root.

The rule files, the leaderboard, the study index, the browser and the generated output reference
(``docs/reference/outputs.md``) all take their paths from here; nothing else spells out a ``results/`` path.
A study's results root is ``results`` and its logs lie beside it (``logs``); a limited smoke-test run (config key
``limit``) keeps its own of each, ``results/limit-N`` and ``logs/limit-N`` (:func:`run_layout`). Each stage declares
its own outputs' columns and schema versions here (:func:`declare`, when its module is imported), so core imports
and names no later stage.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath

#: The default results root, relative to the study directory.
RESULTS = "results"
#: The logs folder (one log per job, mirroring the results' names), beside the results root: ``logs`` for ``results``.
LOGS = "logs"

_FIELD = re.compile(r"\{(\w+)\}")
#: The one rule for a wildcard's value (and so for every name a path is made of: models, datasets, variants, tables):
#: one path component, whole (``fullmatch``, never ``$``, which also matches before a final newline): no separator,
#: not ``.`` or ``..`` (:func:`is_value`), no control character (C0, DEL, C1, line and paragraph separators).
WILDCARD_VALUE = r"[^/\\\x00-\x1f\x7f-\x9f\u2028\u2029]+"
_VALUE = re.compile(WILDCARD_VALUE)
#: A limited run's results and logs roots are this prefix and its limit under the default roots.
_LIMITED = "limit-"


@dataclass(frozen=True)
class Output:
    """One output: its template under the results root and what it holds (one line, for the reference)."""

    name: str
    template: str
    what: str

    @property
    def wildcards(self) -> tuple[str, ...]:
        return tuple(_FIELD.findall(self.template))


def _outputs(table: str) -> dict[str, Output]:
    """The outputs of a text table: a line ``name template`` each, then what it holds on the indented line below."""
    entries: list[list[str]] = []
    for line in table.strip().splitlines():
        if line.startswith(" "):
            entries[-1].append(line.strip())
        else:
            entries.append(line.split())
    return {name: Output(name, template, " ".join(what)) for name, template, *what in entries}


#: Every output, by name. Templates are relative to the results root.
OUTPUTS = _outputs("""
dataset                  datasets/{dataset}
    a dataset's folder: its manifest, bad images and written images
manifest                 datasets/{dataset}/manifest.parquet
    one row per image: id, path, labels, size, boxes
bad_images               datasets/{dataset}/bad_images.csv
    the images that could not be decoded, with the error
images                   datasets/{dataset}/images
    images an adapter writes (the demo, ImageNet-Hard)
labels                   labels/{dataset}/{labels_file}
    a label set's per-image labels (multilabel.parquet)
masks                    masks/{dataset}/{method}.parquet
    object masks per image (bbox, sam_box or sam_auto)
contact_sheet            masks/{dataset}/{method}_contact_sheet.png
    the masks over a sample of images
zero_shot_head           zero_shot/{head}.safetensors
    an open_clip model's zero-shot classifier head
predictions              predictions/{dataset}/{variant}/{model}.parquet
    top-k per image and zoom transform (top5 columns with inference.store_top5)
aggregates               predictions/{dataset}/{variant}/{model}.aggregates.parquet
    views averaged per image
predictions_part         predictions/{dataset}/{variant}/{model}.part{part}.parquet
    one part of a prediction job (inference.parts > 1; temporary, merged into predictions)
aggregates_part          predictions/{dataset}/{variant}/{model}.part{part}.aggregates.parquet
    one part's aggregates (temporary, merged into aggregates)
standard                 standard/{dataset}/{model}.parquet
    the standard (resize + centre crop) evaluation
tta                      tta/{dataset}/{method}/{model}.parquet
    test-time augmentation predictions
metrics                  analysis/{scored}/{variant}/{model}/metrics.json
    1-crop, upper-bound and cover metrics
cover                    analysis/{scored}/{variant}/{model}/cover.json
    the greedy and exact set covers
correct                  analysis/{scored}/{variant}/{model}/correct.npz
    the image x transform correctness matrix
policies                 policies/{scored}/{variant}/{model}.json
    label-free zoom policies, cross-validated
policy_choices           policies/{scored}/{variant}/{model}.choices.parquet
    each image's held-out choice per policy and budget (cross-validated)
policy_transfer          policies/transfer/{source}/{scored}/{variant}/{model}.json
    policies moved across
hard                     hard/{scored}.parquet
    the images no transform classifies correctly (ImageNet-Hard's layout)
hard_summary             hard/summary.{ext}
    the hard sets' composition by origin (csv, md)
object_counts            stats/object_counts/{dataset}.parquet
    objects per image (Mann-Whitney U's input)
mann_whitney             stats/mannwhitney.csv
    Mann-Whitney U between the object counts of dataset pairs
object_counts_figure     stats/object_counts.png
    the object counts' distributions, per dataset
anchor_grid              figures/{scored}/{variant}/{model}/anchor_grid.png
    accuracy per anchor and scale
scale_curves             figures/{scored}/{variant}/{model}/scale_curves.png
    accuracy against scale, per anchor
top_k_locations          figures/{scored}/{variant}/{model}/top_k_locations.png
    where the greedy picks lie
centre_bias              figures/{scored}/{variant}/{model}/centre_bias.png
    the centre anchor's share of the picks
upper_bounds             figures/{scored}/upper_bounds.png
    1 crop -> top-k -> all transforms, per model
variants_figure          figures/{scored}/variants.png
    original, object-only and background-only, per model
zoom_policies_figure     figures/{scored}/zoom_policies.png
    policy accuracy against forward passes
where_zoom_helps_figure  figures/{scored}/where_zoom_helps.png
    1-crop, the best policy and acc_max by object size and centre distance, per model
browser                  browser/index.html
    the per-image browser's page (open it in a browser)
browser_assets           browser/assets
    the page's script, style and class names
browser_catalogue        browser/catalogue.js
    the scored datasets the page offers
browser_data             browser/data/{scored}
    a scored dataset's index and page shards for the browser
browser_thumbnails       browser/thumbnails/{dataset}
    a dataset's thumbnails, shared by its label sets
browser_crops            browser/crops/{scored}
    the crop of each model's first greedy pick that solves an image
table                    {table}.{ext}
    a table as CSV or Markdown (table_a8, table_1, ...: each below)
table_a8                 table_a8.{ext}
    Table A8: upper bounds on original, object-only and background-only images
table_1                  table_1.{ext}
    Table 1: 1 crop, the top-k cover and all transforms; a column per dataset
table_zoom_groups        table_zoom_groups.{ext}
    zoom-in, zoom-out and zoom-224 within each greedy cover
table_aggregation        table_aggregation.{ext}
    the aggregation methods' accuracy on the original images
table_imagenet_hard      table_imagenet_hard.{ext}
    ImageNet-Hard: the standard evaluation beside the card
table_multilabel         table_multilabel.{ext}
    multi-label accuracy (Shankar et al. 2020) beside top-1
table_tta                table_tta.{ext}
    Table 5: test-time adaptation (MEMO) against the standard evaluation
table_zoom_policies      table_zoom_policies.{ext}
    zoom policies' accuracy against forward passes
table_where_zoom_helps   table_where_zoom_helps.{ext}
    1-crop, the best policy and acc_max by object size and centre distance
leaderboard              leaderboard.{ext}
    the study's leaderboard (csv, md, html; `zoomeval leaderboard` merges)
report                   report.html
    Snakemake's report of the run's targets (zoomeval run --report)
study_index              study.json
    the sealed study index: every finished result, its sha256 and key
audit                    audit.json
    the last `zoomeval audit`'s record (sample, seed, device, results): for reference only
""")


@dataclass(frozen=True)
class Declared:
    """What the stage that writes an output declares of it: its columns in order and its schema version."""

    columns: tuple[str, ...] = ()
    schema_version: int | None = None


#: Each output's columns and schema version, as the module that writes it declares them when it is imported
#: (:func:`declare`): core imports no later stage and names none; the outputs reference imports every stage to read
#: them (tools/docs.py).
DECLARED: dict[str, Declared] = {}


def declare(name: str, columns: Iterable[object] = (), schema_version: int | None = None) -> None:
    """Declare output ``name``'s columns (names, or Arrow fields: their names) and schema version, from the module
    that writes it. Declaring one output differently twice is refused, as is a name the layout does not have."""
    if name not in OUTPUTS:
        raise KeyError(f"declare: the layout has no output {name!r}")
    declared = Declared(tuple(getattr(column, "name", column) for column in columns), schema_version)
    if DECLARED.setdefault(name, declared) != declared:
        raise ValueError(f"declare: output {name!r} is declared twice, differently")


#: What each wildcard of a template stands for (the output reference's key).
WILDCARDS = {
    "dataset": "a dataset of the config (key `datasets`)",
    "scored": "a dataset as scored with a label set: its name, suffixed `_<label set>` for its other label sets "
    "(e.g. `imagenet_real`)",
    "variant": "`original`, `fgset` (object only) or `bgset` (background only)",
    "model": "a model of the config (key `models`)",
    "method": "a mask method (`bbox`, `sam_box`, `sam_auto`) or a test-time method (`none`, `memo_augmix`, `memo_rrc`)",
    "head": "an open_clip model's zero-shot head (its weights and class names)",
    "labels_file": "a label set's labels file (`multilabel.parquet`)",
    "part": "a part of a prediction job, 0 to `inference.parts` - 1",
    "source": "the scored dataset whose fitted policies are applied to `{scored}`",
    "table": "a table's name",
    "ext": "a table's format: `csv` or `md` (the leaderboard also `html`)",
    "download": "a downloaded input, under the resources root",
    "snapshot": "a Hugging Face snapshot, under the resources root",
    "extracted": "an extracted archive, under the resources root",
    "weights": "a model's weights folder, under the resources root",
}

#: Each job's log, by its rule's name (``dataset``: both manifest rules; ``table``: every table's). Templates are
#: relative to the logs root.
JOB_LOGS = {
    "fetch_url": "fetch/{download}.log",
    "fetch_hf": "fetch/{snapshot}.log",
    "extract_archive": "fetch/{extracted}.log",
    "fetch_weights": "fetch/{weights}.log",
    "dataset": "datasets/{dataset}.log",
    "multilabel_labels": "labels/{dataset}.log",
    "box_masks": "masks/{dataset}/bbox.log",
    "sam_masks": "masks/{dataset}/{method}.log",
    "contact_sheet": "masks/{dataset}/{method}_contact_sheet.log",
    "zero_shot_head": "zero_shot/{head}.log",
    "predict": "predictions/{dataset}/{variant}/{model}.log",
    "predict_part": "predictions/{dataset}/{variant}/{model}.part{part}.log",
    "merge_predictions": "predictions/{dataset}/{variant}/{model}.merge.log",
    "standard_eval": "standard/{dataset}/{model}.log",
    "tta": "tta/{dataset}/{method}/{model}.log",
    "analyze": "analysis/{scored}/{variant}/{model}.log",
    "zoom_policies": "policies/{scored}/{variant}/{model}.log",
    "zoom_policies_transfer": "policies/transfer/{source}/{scored}/{variant}/{model}.log",
    "object_counts": "stats/object_counts/{dataset}.log",
    "mann_whitney": "stats/mannwhitney.log",
    "model_figures": "figures/{scored}/{variant}/{model}.log",
    "dataset_figures": "figures/{scored}.log",
    "zoom_policy_figure": "figures/{scored}.zoom_policies.log",
    "where_zoom_helps_figure": "figures/{scored}.where_zoom_helps.log",
    "browser_thumbnails": "browser/thumbnails/{dataset}.log",
    "browser_crops": "browser/crops/{scored}.log",
    "browser_data": "browser/data/{scored}.log",
    "browser": "browser/site.log",
    "hard_set": "hard/{scored}.log",
    "hard_summary": "hard/summary.log",
    "table": "tables/{table}.log",
}


def _fill(template: str, wildcards: dict[str, object]) -> str:
    """``template`` with the given wildcards filled in and the others left as ``{name}`` (for Snakemake)."""
    unknown = set(wildcards) - set(_FIELD.findall(template))
    if unknown:
        raise KeyError(f"{template}: no wildcard {sorted(unknown)}")
    return _FIELD.sub(lambda m: str(wildcards[m[1]]) if m[1] in wildcards else m[0], template)


def cases_of(name: str) -> tuple[str, ...]:
    """The outputs that are cases of output ``name``: its template with some wildcards given (``table_a8`` and the
    other tables of ``table``), not another file that merely matches it (``aggregates`` of ``predictions``)."""
    layout = Layout()
    cases = []
    for other in OUTPUTS:
        values = layout.parse(name, layout.path(other)) if other != name else None
        if values is not None and all("{" not in v or _FIELD.fullmatch(v) for v in values.values()):
            cases.append(other)
    return tuple(cases)


def relative_to(name: str, page: str, **wildcards: object) -> str:
    """Output ``name``'s path relative to the folder of output ``page`` (the link a page there gives it)."""
    folder = posixpath.dirname(OUTPUTS[page].template)
    return posixpath.relpath(_fill(OUTPUTS[name].template, wildcards), folder or ".")


@dataclass(frozen=True)
class Layout:
    """The outputs under one results root (``results`` unless a config names another) and the jobs' logs under
    ``logs`` (default: a ``logs`` folder beside the results root, so a run under another root keeps its logs apart)."""

    root: str = RESULTS
    logs: str = ""

    def __post_init__(self) -> None:
        if not self.logs:
            object.__setattr__(self, "logs", str(PurePosixPath(self.root).parent / LOGS))

    def path(self, name: str, **wildcards: object) -> str:
        """The path of output ``name`` (``metrics``, ...), relative to the study directory; wildcards not given stay
        ``{name}`` for Snakemake to fill."""
        return str(PurePosixPath(self.root) / _fill(OUTPUTS[name].template, wildcards))

    def log(self, rule: str, **wildcards: object) -> str:
        """The log of a job of ``rule`` (a key of :data:`JOB_LOGS`), as :meth:`path` fills an output's."""
        return str(PurePosixPath(self.logs) / _fill(JOB_LOGS[rule], wildcards))

    def glob(self, name: str, **wildcards: object) -> str:
        """:meth:`path` with the wildcards not given as ``*`` (a pattern for ``Path.glob``)."""
        return _FIELD.sub("*", self.path(name, **wildcards))

    def parse(self, name: str, path: str) -> dict[str, str] | None:
        """The wildcards of ``path`` as output ``name`` (relative to the study directory), or None if it is not one
        (or a value breaks :data:`WILDCARD_VALUE`)."""
        match = _parser(self.root, name).fullmatch(str(PurePosixPath(path)))
        values = None if match is None else match.groupdict()
        return values if values is not None and all(map(is_value, values.values())) else None


def is_value(value: str) -> bool:
    """Is ``value`` a wildcard's value by the one rule (:data:`WILDCARD_VALUE`, whole, and not ``.`` or ``..``)?"""
    return _VALUE.fullmatch(value) is not None and value not in (".", "..")


@functools.lru_cache(maxsize=1024)
def _parser(root: str, name: str) -> re.Pattern[str]:
    """Output ``name``'s template under ``root`` as a regex, each wildcard a :data:`WILDCARD_VALUE` (compiled once:
    an index of 20,000 entries parses each of its paths several times)."""
    pattern = re.escape(str(PurePosixPath(root) / OUTPUTS[name].template))
    return re.compile(re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m[1]}>{WILDCARD_VALUE})", pattern))


def run_layout(limit: int | None) -> Layout:
    """The layout of a run: the default roots, or for a run limited to the first ``limit`` images of each dataset
    (config key ``limit``) trees of its own, ``results/limit-N`` and ``logs/limit-N``, so that a smoke test never
    overwrites or mixes with the full run's results or logs. Both roots are given: the default logs root beside
    ``results/limit-N`` would be ``results/logs``, inside the full run's results."""
    if limit is None:
        return Layout()
    return Layout(limited_root(limit), logs=f"{LOGS}/{_LIMITED}{limit}")


def limited_root(limit: int | str) -> str:
    """The results root of a run limited to ``limit`` images, ``results/limit-N`` (``limit`` may be a placeholder
    such as ``"N"``, for a help text)."""
    return f"{RESULTS}/{_LIMITED}{limit}"


def limit_of(layout: Layout) -> int | None:
    """The limit of a run's layout (:func:`run_layout`): N for ``results/limit-N``, None for the full run's."""
    name = layout.root.removeprefix(f"{RESULTS}/")
    return int(name.removeprefix(_LIMITED)) if name.startswith(_LIMITED) and name[len(_LIMITED) :].isdigit() else None
