"""The workflow config as typed, frozen dataclasses, with every default in one place.

A config is validated first (:mod:`zoomeval.core.validate`: normalisation, the JSON schema, the package's own
checks) and then resolved once by :func:`resolve`; rules and scripts read the result, never the raw mapping. The
JSON schema declares each default for the docs but does not apply it (tests/test_config.py checks that the two
agree): a key the config leaves out takes the default of its dataclass field below. Defaults that depend on the
dataset's adapter (``variants``, ``count_method``) and the adapter's published zip password come from the adapter
registry, passed in as :class:`Registries` (core does not import the later stages).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

#: Default ``max_resized_pixels``: 2^24, e.g. 16384 x 1024, which admits any image up to 16:1 at S = 1024
#: (ImageNet's photos are about 4:3).
MAX_RESIZED_PIXELS = 1 << 24
#: Default ``cover_node_limit``: the branch-and-bound nodes HiGHS may explore for each exact cover (the zoom benches'
#: covers are proven within 11-559 nodes; a hard one of 2,283 reduced images is not within 4,519).
COVER_NODE_LIMIT = 1000
#: Default ``cover_time_limit``: seconds, a safety stop only (reaching it stops the analysis job, since a cover cut
#: short by the clock would depend on the machine's speed).
COVER_TIME_LIMIT = 1800.0
log = logging.getLogger(__name__)
Triple = tuple[float, float, float]


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the fix."""


@dataclass(frozen=True)
class Registries:
    """The extension points a config names: dataset adapters, model sources and label sets, each a mapping from
    name to its registered entry (:class:`zoomeval.core.registry.Registry`)."""

    adapters: Mapping[str, Any]
    sources: Mapping[str, Any]
    label_sets: Mapping[str, Any]


@dataclass(frozen=True)
class InputSpec:
    """One input of the config: a local path (``plain``: given as a bare string), a URL or a Hugging Face repo."""

    path: str | None = None
    url: str | None = None
    hf: str | None = None
    sha256: str | None = None
    pattern: str | None = None
    revision: str | None = None
    plain: bool = False

    @classmethod
    def from_config(cls, value: str | Mapping[str, str]) -> InputSpec:
        return cls(path=value, plain=True) if isinstance(value, str) else cls(**value)

    def to_config(self) -> str | dict[str, str]:
        """The input as the config gives it (a rule param: changing it reruns the jobs that read it)."""
        if self.plain:
            return str(self.path)
        return {k: v for k, v in asdict(self).items() if v is not None and k != "plain"}

    @property
    def file_name(self) -> str:
        """The file name a URL input is downloaded under (its path's last part, without a query)."""
        return str(self.url).split("?")[0].rstrip("/").rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DatasetConfig:
    """One entry of ``datasets``."""

    name: str
    adapter: str
    #: the input keys the entry gives (root, images, annotations, real, parquet)
    inputs: Mapping[str, InputSpec] = field(default_factory=dict)
    #: the entry's password, else the one the adapter's publishers give out (None: no encrypted zips)
    password: str | None = None
    scenes: str = "standard"
    class_set: str = "full"
    #: default: all three where the adapter gives boxes, else original only
    variants: tuple[str, ...] = ("original",)
    mask_method: str = "bbox"
    #: set for the datasets of stats.pairs only; default bbox where the adapter gives boxes, else sam_auto
    count_method: str | None = None
    label_sets: tuple[str, ...] = ("in",)

    def source(self) -> dict[str, Any]:
        """The keys that decide the manifest, with sorted keys (a rule param: reordering the YAML reruns nothing)."""
        entry = {"adapter": self.adapter, "scenes": self.scenes, **{k: s.to_config() for k, s in self.inputs.items()}}
        if self.password is not None:
            entry["password"] = self.password
        return {k: entry[k] for k in sorted(entry)}


@dataclass(frozen=True)
class ModelSpec:
    """One entry of ``models``."""

    name: str
    source: str
    architecture: str
    weights: str
    input_size: int = 224
    mean: Triple | None = None  # None: the weights' own normalisation
    std: Triple | None = None
    #: sources ``checkpoint`` and ``open_clip``: a checkpoint file, a local path, ``{path: ...}`` or ``{url: ...}``
    checkpoint: str | Mapping[str, str] | None = None
    #: the keys only its source reads, typed by the dataclass the source declares (None: a source without any)
    options: Any = None

    @classmethod
    def from_config(cls, name: str, entry: Mapping[str, Any], sources: Mapping[str, Any] | None = None) -> ModelSpec:
        """The typed entry; ``sources`` (the model-source registry) types the keys only the entry's source reads and
        gives the input size where the source's default is not 224."""
        common = {f.name for f in fields(cls)} - {"name", "options"}
        source = sources[entry["source"]] if sources is not None else None
        if getattr(source, "canonical", None) is not None:  # the library's own spelling of a model
            entry = source.canonical(name, dict(entry))
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in entry.items() if k in common}
        own = {k: v for k, v in entry.items() if k not in common}
        accepted = _names(source.options) if getattr(source, "options", None) is not None else set()
        if stray := [k for k in own if k not in accepted]:
            readers = [s.name for s in (sources or {}).values() if s.options and stray[0] in _names(s.options)]
            raise ConfigError(f"models.{name}.{stray[0]}: only source {' or '.join(readers)} reads it; "
                              f"remove it from this {entry['source']} model")  # fmt: skip
        options = source.options(**own) if accepted else None
        spec = cls(name=name, **values, options=options)
        if "input_size" not in entry and getattr(source, "input_size", None) is not None:
            spec = replace(spec, input_size=source.input_size(spec))
        return spec

    @property
    def arch_tag(self) -> str:
        """The architecture and weights as one name, timm's ``arch.tag`` spelling (``resnet50.a1_in1k``)."""
        return f"{self.architecture}.{self.weights}"

    def entry(self) -> dict[str, Any]:
        """The config entry with its defaults and sorted keys (a rule param: any change reruns the model's jobs)."""
        values = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None}
        if isinstance(self.checkpoint, Mapping):
            values["checkpoint"] = dict(self.checkpoint)
        values |= values.pop("options", {}) or {}
        return {k: values[k] for k in sorted(values) if k != "name" and values[k] is not None}


def _names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


@dataclass(frozen=True)
class InferenceSettings:
    """The ``inference`` section."""

    batch_size: int = 64
    device: str = "auto"
    num_workers: int = 1
    #: torch threads; 0: the job's threads
    threads: int = 0
    precision: str = "fp32"
    #: pil | torch (in the DataLoader workers) | device (on the inference device, zoomeval.inference.crops) |
    #: auto (device on CUDA, pil on a CPU)
    resize_backend: str = "auto"
    compile: bool = False
    #: the model's weights and inputs in NHWC memory order (faster convolutions on CPU and GPU)
    channels_last: bool = True
    store_top5: bool = False
    shard_images: int = 500
    #: jobs a prediction file is split into, each on a contiguous run of whole shards (one GPU each), then merged
    parts: int = 1

    @property
    def crop_pixels(self) -> str:
        """What the crops' pixels depend on: PIL's arithmetic (``pil``, ``device`` and ``auto`` give the same crops, bit
        for bit) or torch's (``torch``); a rule param, so that switching between the first three reruns nothing."""
        return "torch" if self.resize_backend == "torch" else "pil"

    def for_job(self, job_threads: int) -> InferenceSettings:
        """The settings a job runs with: ``threads: 0`` becomes the job's threads (at most the CPUs), and
        ``num_workers`` is capped at the job's threads (more DataLoader workers than cores only contend), saying so."""
        workers = min(self.num_workers, max(1, job_threads))
        if workers < self.num_workers:
            log.warning("inference.num_workers: %d capped at this job's %d cores", self.num_workers, job_threads)
        return replace(self, threads=self.threads or min(job_threads, os.cpu_count() or 1), num_workers=workers)

    def for_device(self, device_type: str) -> InferenceSettings:
        """The settings on a ``device_type`` torch device: ``compile`` is for CUDA only (on a CPU inductor needs a C++
        toolchain, and a job of the GPU preset died there with SIGSEGV), so it is turned off elsewhere, saying so.
        (``device: cpu`` with ``compile: true`` is refused by the config check.)"""
        if self.compile and device_type != "cuda":
            log.warning("inference.compile: turned off: inference.device %r resolved to the %s here, and torch.compile "
                        "is used on CUDA only", self.device, device_type)  # fmt: skip
            return replace(self, compile=False)
        return self


@dataclass(frozen=True)
class CountFilter:
    """``sam.counting``: the rule that turns automatic SAM masks into counted objects
    (:func:`zoomeval.masks.sam.count_objects`). The quality defaults are those of SAM's automatic mask generator;
    a kept mask must cover at least 0.1 % of the image, and a mask overlapping a better one with IoU above one
    half is a duplicate."""

    min_iou: float = 0.88
    min_stability: float = 0.95
    min_area_fraction: float = 0.001
    max_overlap: float = 0.5


@dataclass(frozen=True)
class SamConfig:
    """The ``sam`` section."""

    model_type: str
    checkpoint: InputSpec
    device: str = "auto"
    counting: CountFilter = CountFilter()
    #: keyword arguments of segment_anything's SamAutomaticMaskGenerator
    generator: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> SamConfig:
        counting = CountFilter(**section.get("counting", {}))
        return cls(**{**section, "checkpoint": InputSpec.from_config(section["checkpoint"]), "counting": counting})

    def entry(self) -> dict[str, Any]:
        """The section with its defaults and sorted keys (a rule param: any change reruns the SAM masks)."""
        values = {**asdict(self), "checkpoint": self.checkpoint.to_config(), "generator": dict(self.generator)}
        return {k: values[k] for k in sorted(values)}


@dataclass(frozen=True)
class StatsConfig:
    """The ``stats`` section: dataset pairs compared by the Mann-Whitney U test."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> StatsConfig:
        return cls(**{k: tuple(map(tuple, v)) for k, v in section.items()})

    @property
    def datasets(self) -> list[str]:
        return sorted({name for pair in self.pairs for name in pair})


#: Default ``multilabel``: Shankar et al.'s annotations where the authors publish them, with the sha256 TensorFlow
#: Datasets pins (imagenet2012_multilabel/checksums.tsv, 200,417,830 bytes; Shift Happens pins md5
#: 81d98aa82e570a3b2db98af5ccf87145 for the same URL).
MULTILABEL_ANNOTATIONS = InputSpec(
    url="https://storage.googleapis.com/brain-car-datasets/imagenet-mistakes/human_accuracy_v3.0.0.json",
    sha256="d5b2b6111fc9efea16aaebd21bc5a401d16ad18285d3fd99635d8b32ebdb6287",
)


@dataclass(frozen=True)
class BrowserConfig:
    """The ``browser`` section: the per-image browser, results/browser/index.html."""

    #: images per dataset; a larger dataset is sampled evenly over its manifest order
    max_images: int = 2000
    #: longer side of the thumbnails and crops, in pixels
    thumbnail_size: int = 160
    page_size: int = 24
    #: greedy picks whose predictions each image lists, after the 1-crop
    predictions_shown: int = 3


#: The test-time methods of the ``tta`` stage: the standard evaluation, then MEMO on AugMix or RandomResizedCrop views.
TTA_METHODS = ("none", "memo_augmix", "memo_rrc")


@dataclass(frozen=True)
class MemoSettings:
    """MEMO's settings (the ``tta`` keys that change a MEMO method's numbers, except ``seed``): the authors' ImageNet
    ResNet-50 settings, except ``views`` (the paper's K = 16; the authors' code defaulted to 64)."""

    views: int = 16
    steps: int = 1
    lr: float = 0.00025
    momentum: float = 0.0
    weight_decay: float = 0.0
    #: N of the BatchNorm prior (blend N/(N+1) : 1/(N+1)); None: plain eval-mode BatchNorm
    prior_strength: float | None = 16.0
    #: blend the statistics of the standard view into the final prediction too, as the authors' code does
    prior_at_prediction: bool = True


@dataclass(frozen=True)
class TTAConfig(MemoSettings):
    """The ``tta`` section: test-time adaptation (MEMO) and the paper's Table 5, target ``results/table_tta.csv``."""

    methods: tuple[str, ...] = TTA_METHODS
    #: () : every dataset / every model of the config
    datasets: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    seed: int = 0
    #: config model -> the paper's Table 5 row it reproduces (its numbers are printed beside ours)
    paper_models: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> TTAConfig:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in section.items()})

    def memo(self) -> MemoSettings:
        """The MEMO settings alone (a MEMO job's params, with ``seed``)."""
        return MemoSettings(**{f.name: getattr(self, f.name) for f in fields(MemoSettings)})


@dataclass(frozen=True)
class PoliciesConfig:
    """The ``policies`` section: label-free zoom policies held out from their calibration images
    (:mod:`zoomeval.analysis.policies`) and results/table_zoom_policies.csv."""

    #: views per image of the fixed-set policies and the cascade's budgets; every view is always added
    budgets: tuple[int, ...] = (1, 2, 4, 9, 18, 36, 72, 144, 324)
    #: k of the k-fold cross-validation over images, and the seed of the folds and of the selector's sample
    folds: int = 5
    seed: int = 0
    #: most (image, view) pairs the selector's logistic regression is fitted on per fold and budget
    selector_rows: int = 200_000
    #: (source, target) scored datasets: fitted on every source image, scored on every target image
    transfer: tuple[tuple[str, str], ...] = ()
    #: MEMO's rows from results/table_tta.csv beside the policies (builds the tta stage)
    memo: bool = False

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> PoliciesConfig:
        values = {k: tuple(map(tuple, v)) if k == "transfer" else v for k, v in section.items()}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


@dataclass(frozen=True)
class WhereZoomConfig:
    """The ``where_zoom_helps`` section: results/table_where_zoom_helps.csv's best label-free policy."""

    #: views per image at which the best cross-validated policy is chosen and scored per bin (one of the policies'
    #: budgets; above the number of transforms, every view)
    budget: int = 4


@dataclass(frozen=True)
class Config:
    """The whole config."""

    scales: tuple[int, ...]
    datasets: Mapping[str, DatasetConfig]
    models: Mapping[str, ModelSpec]
    top_k: int = 36
    on_bad_image: str = "skip"
    max_resized_pixels: int = MAX_RESIZED_PIXELS
    cover_node_limit: int = COVER_NODE_LIMIT
    cover_time_limit: float = COVER_TIME_LIMIT
    #: where downloads, Hugging Face files, weights and extracted archives go
    resources: str = "resources"
    #: the first N images of each dataset only (a smoke test, in a results tree of its own); None: every image
    limit: int | None = None
    inference: InferenceSettings = InferenceSettings()
    sam: SamConfig | None = None
    stats: StatsConfig = StatsConfig()
    browser: BrowserConfig = BrowserConfig()
    #: Shankar et al.'s human_accuracy_v3.0.0.json, read by the multilabel and imagenet_m label sets
    multilabel: InputSpec = MULTILABEL_ANNOTATIONS
    tta: TTAConfig = TTAConfig()
    policies: PoliciesConfig = PoliciesConfig()
    where_zoom_helps: WhereZoomConfig = WhereZoomConfig()


#: The config's sections, by key, and how each is typed: a new section is a dataclass, a line here and a field of
#: :class:`Config`.
SECTIONS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "inference": lambda section: InferenceSettings(**section),
    "sam": SamConfig.from_config,
    "stats": StatsConfig.from_config,
    "browser": lambda section: BrowserConfig(**section),
    "multilabel": InputSpec.from_config,
    "tta": TTAConfig.from_config,
    "policies": PoliciesConfig.from_config,
    "where_zoom_helps": lambda section: WhereZoomConfig(**section),
}


def scored_name(dataset: str, label_set: str) -> str:
    """The ``dataset`` value of a Table A8 row: the dataset's name, suffixed ``_<label set>`` unless ``in``."""
    return dataset if label_set == "in" else f"{dataset}_{label_set}"


def _given(cls: type, section: Mapping[str, Any]) -> dict[str, Any]:
    """The keys of ``section`` that are fields of ``cls`` (the schema refuses any other)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in section.items() if k in names}


def resolve_dataset(name: str, entry: Mapping[str, Any], adapter: Any, counted: bool) -> DatasetConfig:
    """A dataset entry with its defaults; ``counted``: the dataset is in ``stats.pairs``."""
    inputs = {k: InputSpec.from_config(entry[k]) for k in adapter.inputs if k in entry}
    values = {**_given(DatasetConfig, entry), "inputs": inputs}
    values["password"] = entry.get("password", adapter.password)
    values.setdefault("variants", ("original", "fgset", "bgset") if adapter.boxes else ("original",))
    if counted:  # objects are counted only for the statistics
        values.setdefault("count_method", "bbox" if adapter.boxes else "sam_auto")
    else:
        values["count_method"] = None
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
    return DatasetConfig(name=name, **values)


def resolve(raw: Mapping[str, Any], registries: Registries) -> Config:
    """The typed config of a config mapping that passed the schema."""
    sections = {key: make(raw[key]) for key, make in SECTIONS.items() if key in raw}
    counted = set(sections.get("stats", Config.stats).datasets)
    datasets = {
        name: resolve_dataset(name, entry, registries.adapters[entry["adapter"]], name in counted)
        for name, entry in raw["datasets"].items()
    }
    models = {name: ModelSpec.from_config(name, entry, registries.sources) for name, entry in raw["models"].items()}
    top = {k: v for k, v in raw.items() if k not in ("datasets", "models", *SECTIONS)}
    return Config(**{**top, "scales": tuple(raw["scales"])}, datasets=datasets, models=models, **sections)
