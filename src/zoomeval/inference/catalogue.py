"""What a model source's library can build: its architectures and each one's pretrained weights tags, read from the
library itself (torchvision's weight enums, ``timm.list_pretrained()``, ``open_clip.list_pretrained()``).

Each pretrained model's output width comes from the library's own config (timm's pretrained config ``num_classes``,
torchvision's weights meta ``categories``; an open_clip zero-shot head is as wide as its class names, the 1000
ImageNet classes): every dataset's class set is ImageNet-1k's or a subset of it, scored over the first 1000 logits,
so a model of another width (an embedding, a 21k-class head) or none (a feature extractor) cannot be evaluated.

``zoomeval list models SOURCE`` prints it (marking the models that cannot be evaluated, with why), and the workflow
checks every model's architecture, tag and width against it when the DAG is built, so that ``snakemake -n`` refuses
a misspelt name, with the closest names, and a model without ImageNet-1k's head, before any job.
Building the DAG must not import the ML stack (each library imports torch: seconds per ``snakemake -n``), so the
workflow reads the catalogue from a JSON file per library version, written once by a child process.
"""

from __future__ import annotations

import difflib
import fnmatch
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from zoomeval.core.classes import NUM_CLASSES
from zoomeval.core.config import ConfigError, ModelSpec
from zoomeval.inference.models import MODEL_SOURCES, ModelSource

#: Closest names a refusal suggests.
SUGGESTIONS = 5
#: Where the workflow keeps the catalogues, under its working directory (a study directory's own).
CACHE = Path(".snakemake", "zoomeval")
#: The layout of a cached catalogue (part of its file name; 2: aliases added; 3: widths added).
LAYOUT = 3


@dataclass(frozen=True)
class Catalogue:
    """A library's model names: every architecture it builds, and the pretrained tags of those that have some."""

    library: str
    version: str
    architectures: tuple[str, ...]
    pretrained: dict[str, tuple[str, ...]]
    #: other names of pretrained models (open_clip: ``hf-hub:<repo>``) -> the (architecture, tag) pairs they name
    aliases: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    #: ``architecture.tag`` -> the width of its output as the library's config gives it (0: no classifier)
    widths: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(
            {
                "library": self.library,
                "version": self.version,
                "architectures": self.architectures,
                "pretrained": self.pretrained,
                "aliases": self.aliases,
                "widths": self.widths,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> Catalogue:
        data = json.loads(text)
        pretrained = {arch: tuple(tags) for arch, tags in data["pretrained"].items()}
        aliases = {name: tuple(map(tuple, pairs)) for name, pairs in data["aliases"].items()}
        return cls(
            data["library"],
            data["version"],
            tuple(data["architectures"]),
            pretrained,
            aliases,  # type: ignore[arg-type]
            data["widths"],
        )


def _source(name: str) -> ModelSource:
    found = MODEL_SOURCES.get(name)
    if found.names is None:
        listing = [s.name for s in MODEL_SOURCES.values() if s.names is not None]
        raise ValueError(f"model source {name!r} lists no models; sources that do: {listing}")
    return found


def catalogue(source: str) -> Catalogue:
    """The catalogue of ``source``'s library, read from the library (imports it)."""
    return _source(source).names()  # type: ignore[misc]


def matching(cat: Catalogue, pattern: str = "*") -> list[tuple[str, str]]:
    """``(architecture, tag)`` of every pretrained model whose ``architecture.tag`` matches the shell pattern."""
    pairs = [(arch, tag) for arch, tags in cat.pretrained.items() for tag in tags]
    return [(arch, tag) for arch, tag in pairs if fnmatch.fnmatchcase(f"{arch}.{tag}", pattern)]


def unusable(cat: Catalogue, architecture: str, tag: str) -> str | None:
    """Why the pretrained model ``architecture.tag`` cannot be evaluated (its output is not ImageNet-1k's classes),
    or None."""
    width = cat.widths.get(f"{architecture}.{tag}")
    if width is None or width == NUM_CLASSES:
        return None
    if width == 0:
        return f"no classifier head ({cat.library}'s config gives 0 outputs: a feature extractor)"
    return f"a {width}-wide output ({cat.library}'s config), not ImageNet-1k's {NUM_CLASSES} classes"


def closest(name: str, names: list[str] | tuple[str, ...]) -> list[str]:
    """The names most like ``name`` (difflib's ratio; case ignored), best first."""
    by_fold = {n.casefold(): n for n in names}
    return [by_fold[n] for n in difflib.get_close_matches(name.casefold(), by_fold, n=SUGGESTIONS, cutoff=0.5)]


def _refusal(key: str, what: str, name: str, names: list[str] | tuple[str, ...]) -> ConfigError:
    near = closest(name, names)
    hint = f"; closest: {', '.join(near)}" if near else ""
    return ConfigError(f"{key}: {name!r} is not {what}{hint}")


def check_names(spec: ModelSpec, cat: Catalogue, source: str) -> None:
    """Refuse an entry whose architecture or weights tag ``cat`` does not have, naming the key and the closest."""
    key, listing = f"models.{spec.name}", f"zoomeval list models {source}"
    if spec.architecture not in cat.architectures:
        pretrained = list(cat.pretrained) or list(cat.architectures)
        raise _refusal(f"{key}.architecture", f"a {source} model ({listing})", spec.architecture, pretrained)
    tags = cat.pretrained.get(spec.architecture, ())
    if spec.weights not in tags:
        raise _refusal(f"{key}.weights", f"a pretrained tag of {spec.architecture} {list(tags)}", spec.weights, tags)
    if why := unusable(cat, spec.architecture, spec.weights):
        raise ConfigError(
            f"{key}: {spec.architecture}.{spec.weights} has {why}, and every dataset is scored over "
            f"those classes (class_set full, or a subset of them); choose ImageNet-1k weights "
            f"(zoomeval list models {source} '{spec.architecture}.*' marks the others)"
        )


def cached_catalogue(source: str, folder: Path) -> Catalogue | None:
    """``source``'s catalogue from ``folder/<library>-<version>.v<LAYOUT>.json``, written first by a child process
    (so this one imports no ML library); None when the library is not installed."""
    library = str(_source(source).library)
    try:
        installed = version(library)
    except PackageNotFoundError:
        return None
    path = folder / f"{library}-{installed}.v{LAYOUT}.json"
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        code = "import sys; from zoomeval.inference.catalogue import write; write(sys.argv[1], sys.argv[2])"
        child = subprocess.run([sys.executable, "-c", code, source, str(path)], capture_output=True, text=True)
        if child.returncode != 0:
            raise RuntimeError(
                f"listing {library} {installed}'s models failed (zoomeval list models {source}): "
                f"{child.stderr.strip()[-2000:]}"
            )
    return Catalogue.from_json(path.read_text())


def write(source: str, path: str) -> None:
    """Write ``source``'s catalogue to ``path`` atomically (a file name of this process's own, then renamed)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    Path(tmp).write_text(catalogue(source).to_json())
    os.replace(tmp, path)
