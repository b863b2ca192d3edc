"""The workflow config as typed, frozen dataclasses, whose defaults are the JSON schema's.

A config is validated first (:mod:`zoomeval.core.validate`: normalisation, the JSON schema, the package's own
checks) and then resolved once by :func:`resolve`; rules and scripts read the result, never the raw mapping. A key
the config leaves out takes the default of its dataclass field below, which the field takes from the JSON schema's
``default`` (:func:`~zoomeval.core.config_schema.schema_defaults`): the classes declare no default of their own
(tests/test_config.py checks it), only ``None`` for a key the schema gives no default. Defaults that depend on the
dataset's adapter (``variants``, ``count_method``) and the adapter's published zip password come from the adapter
registry, passed in as :class:`Registries` (core does not import the later stages).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from zoomeval.core.config_schema import key_schema, schema_defaults

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
@schema_defaults("datasets", "*")
class DatasetConfig:
    """One entry of ``datasets``."""

    name: str
    adapter: str
    #: the input keys the entry gives (root, images, annotations, real, parquet)
    inputs: Mapping[str, InputSpec] = field(default_factory=dict)
    #: the entry's password, else the one the adapter's publishers give out (None: no encrypted zips)
    password: str | None = None
    scenes: str
    class_set: str
    #: default (:func:`resolve_dataset`): all three where the adapter gives boxes, else original only
    variants: tuple[str, ...] = field(kw_only=True)
    mask_method: str
    #: set for the datasets of stats.pairs only; default bbox where the adapter gives boxes, else sam_auto
    count_method: str | None = None
    label_sets: tuple[str, ...]

    def source(self) -> dict[str, Any]:
        """The keys that decide the manifest, with sorted keys (a rule param: reordering the YAML reruns nothing)."""
        entry = {"adapter": self.adapter, "scenes": self.scenes, **{k: s.to_config() for k, s in self.inputs.items()}}
        if self.password is not None:
            entry["password"] = self.password
        return {k: entry[k] for k in sorted(entry)}


@dataclass(frozen=True)
@schema_defaults("models", "*")
class ModelSpec:
    """One entry of ``models``."""

    name: str
    source: str
    architecture: str
    weights: str
    input_size: int
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
            raise ConfigError(
                f"models.{name}.{stray[0]}: only source {' or '.join(readers)} reads it; "
                f"remove it from this {entry['source']} model"
            )
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
@schema_defaults("inference")
class InferenceSettings:
    """The ``inference`` section."""

    batch_size: int
    device: str
    num_workers: int
    #: torch threads; 0: the job's threads
    threads: int
    precision: str
    #: pil | torch (in the DataLoader workers) | device (on the inference device, zoomeval.inference.device_resize) |
    #: auto (device on CUDA, pil on a CPU)
    resize_backend: str
    compile: bool
    #: the model's weights and inputs in NHWC memory order (faster convolutions on CPU and GPU)
    channels_last: bool
    store_top5: bool
    shard_images: int
    #: jobs a prediction file is split into, each on a contiguous run of whole shards (one GPU each), then merged
    parts: int

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
            log.warning(
                "inference.compile: turned off: inference.device %r resolved to the %s here, and torch.compile "
                "is used on CUDA only",
                self.device,
                device_type,
            )
            return replace(self, compile=False)
        return self


@dataclass(frozen=True)
@schema_defaults("sam", "counting")
class CountFilter:
    """``sam.counting``: the rule that turns automatic SAM masks into counted objects
    (:func:`zoomeval.masks.sam.count_objects`). The quality defaults are those of SAM's automatic mask generator;
    a kept mask must cover at least 0.1 % of the image, and a mask overlapping a better one with IoU above one
    half is a duplicate."""

    min_iou: float
    min_stability: float
    min_area_fraction: float
    max_overlap: float


@dataclass(frozen=True)
@schema_defaults("sam", makers={"counting": lambda section: CountFilter(**section)})
class SamConfig:
    """The ``sam`` section."""

    model_type: str
    checkpoint: InputSpec
    device: str
    counting: CountFilter
    #: keyword arguments of segment_anything's SamAutomaticMaskGenerator
    generator: Mapping[str, Any]

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> SamConfig:
        counting = CountFilter(**section.get("counting", {}))
        return cls(**{**section, "checkpoint": InputSpec.from_config(section["checkpoint"]), "counting": counting})

    def entry(self) -> dict[str, Any]:
        """The section with its defaults and sorted keys (a rule param: any change reruns the SAM masks)."""
        values = {**asdict(self), "checkpoint": self.checkpoint.to_config(), "generator": dict(self.generator)}
        return {k: values[k] for k in sorted(values)}


@dataclass(frozen=True)
@schema_defaults("stats")
class StatsConfig:
    """The ``stats`` section: dataset pairs compared by the Mann-Whitney U test."""

    pairs: tuple[tuple[str, str], ...]

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> StatsConfig:
        return cls(**{k: tuple(map(tuple, v)) for k, v in section.items()})

    @property
    def datasets(self) -> list[str]:
        return sorted({name for pair in self.pairs for name in pair})


@dataclass(frozen=True)
@schema_defaults("browser")
class BrowserConfig:
    """The ``browser`` section: the per-image browser, results/browser/index.html."""

    #: images per dataset; a larger dataset is sampled evenly over its manifest order
    max_images: int
    #: longer side of the thumbnails and crops, in pixels
    thumbnail_size: int
    page_size: int
    #: greedy picks whose predictions each image lists, after the 1-crop
    predictions_shown: int


#: The test-time methods of the ``tta`` stage (the schema's enum): the standard evaluation, then MEMO on AugMix or
#: RandomResizedCrop views.
TTA_METHODS: tuple[str, ...] = tuple(key_schema("tta", "methods")["items"]["enum"])


@dataclass(frozen=True)
@schema_defaults("tta")
class MemoSettings:
    """MEMO's settings (the ``tta`` keys that change a MEMO method's numbers, except ``seed``): the authors' ImageNet
    ResNet-50 settings, except ``views`` (the paper's K = 16; the authors' code defaulted to 64)."""

    views: int
    steps: int
    lr: float
    momentum: float
    weight_decay: float
    #: N of the BatchNorm prior (blend N/(N+1) : 1/(N+1)); None: plain eval-mode BatchNorm
    prior_strength: float | None
    #: blend the statistics of the standard view into the final prediction too, as the authors' code does
    prior_at_prediction: bool


@dataclass(frozen=True)
@schema_defaults("tta")
class TTAConfig(MemoSettings):
    """The ``tta`` section: test-time adaptation (MEMO) and the paper's Table 5, target ``results/table_tta.csv``."""

    methods: tuple[str, ...]
    #: () : every dataset / every model of the config
    datasets: tuple[str, ...]
    models: tuple[str, ...]
    seed: int
    #: config model -> the paper's Table 5 row it reproduces (its numbers are printed beside ours)
    paper_models: Mapping[str, str]

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> TTAConfig:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in section.items()})

    def memo(self) -> MemoSettings:
        """The MEMO settings alone (a MEMO job's params, with ``seed``)."""
        return MemoSettings(**{f.name: getattr(self, f.name) for f in fields(MemoSettings)})


@dataclass(frozen=True)
@schema_defaults("policies")
class PoliciesConfig:
    """The ``policies`` section: label-free zoom policies held out from their calibration images
    (:mod:`zoomeval.analysis.policies`) and results/table_zoom_policies.csv."""

    #: views per image of the fixed-set policies and the cascade's budgets; every view is always added
    budgets: tuple[int, ...]
    #: k of the k-fold cross-validation over images, and the seed of the folds and of the selector's sample
    folds: int
    seed: int
    #: most (image, view) pairs the selector's logistic regression is fitted on per fold and budget
    selector_rows: int
    #: (source, target) scored datasets: fitted on every source image, scored on every target image
    transfer: tuple[tuple[str, str], ...]
    #: MEMO's rows from results/table_tta.csv beside the policies (builds the tta stage)
    memo: bool

    @classmethod
    def from_config(cls, section: Mapping[str, Any]) -> PoliciesConfig:
        values = {k: tuple(map(tuple, v)) if k == "transfer" else v for k, v in section.items()}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})


@dataclass(frozen=True)
@schema_defaults("where_zoom_helps")
class WhereZoomConfig:
    """The ``where_zoom_helps`` section: results/table_where_zoom_helps.csv's best label-free policy."""

    #: views per image at which the best cross-validated policy is chosen and scored per bin (one of the policies'
    #: budgets; above the number of transforms, every view)
    budget: int


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


@dataclass(frozen=True)
@schema_defaults(makers=SECTIONS)
class Config:
    """The whole config."""

    scales: tuple[int, ...]
    datasets: Mapping[str, DatasetConfig]
    models: Mapping[str, ModelSpec]
    top_k: int
    on_bad_image: str
    max_resized_pixels: int
    cover_node_limit: int
    cover_time_limit: float
    #: where downloads, Hugging Face files, weights and extracted archives go
    resources: str
    #: the first N images of each dataset only (a smoke test, in a results tree of its own); None: every image
    limit: int | None
    inference: InferenceSettings
    sam: SamConfig | None = None
    stats: StatsConfig
    browser: BrowserConfig
    #: Shankar et al.'s human_accuracy_v3.0.0.json, read by the multilabel and imagenet_m label sets
    multilabel: InputSpec
    tta: TTAConfig
    policies: PoliciesConfig
    where_zoom_helps: WhereZoomConfig


#: Defaults that code outside a config reads (a function's default argument, a bench's option): the schema's.
MAX_RESIZED_PIXELS: int = Config.max_resized_pixels
COVER_NODE_LIMIT: int = Config.cover_node_limit
COVER_TIME_LIMIT: float = Config.cover_time_limit
MULTILABEL_ANNOTATIONS: InputSpec = Config.multilabel


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
