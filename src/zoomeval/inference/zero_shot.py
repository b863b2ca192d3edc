"""The zero-shot head that turns an image-text model into a 1000-way ImageNet classifier (CLIP's recipe).

For each class, the class name is put into every template (``"a photo of a {}."``), the text embeddings are
L2-normalised and averaged, and the mean is normalised again; the head is the ``(n_classes, dim)`` matrix of
these class embeddings, and ``logits = 100 * normalise(image features) @ head.T``.

Class names and templates default to the CLIP-curated ImageNet names and the 80 OpenAI templates that
open_clip ships (``open_clip.zero_shot_metadata``); a config key may point to files instead (class names: 1000
lines; templates: one per line, each with one ``{}``). Either way they are recorded by the sha256 of their text
(one entry per line, ``\\n``-terminated), so the defaults and a file with the same lines have the same hash.

The curated names repeat two names ("missile" at 657 and 744, "sunglasses" at 836 and 837). Identical names
give identical text embeddings, and ``argmax`` returns the first of equal maxima, so under ``keep_first`` (the
published recipe) classes 744 and 837 can never be predicted over the full class set. ``wordnet_lemmas`` renames
every class of such a group to its first WordNet lemma (timm's ImageNet class info) that no other class uses:
missile / projectile, sunglass / sunglasses. The policy, the duplicates found and the classes that cannot be
predicted are recorded in the head's provenance and in every prediction file.

The head is computed once per (model, weights, class names, templates, policy) by its own workflow rule and
saved as safetensors with its provenance in the metadata (:func:`write_head`, :func:`read_head`). Each distinct
name is encoded once, so repeated names get bit-identical class embeddings.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from zoomeval.core.layout import declare

if TYPE_CHECKING:  # torch and open_clip load only where a head is computed or read, not in the DAG
    import torch

#: Version of the head file's layout and provenance keys.
HEAD_SCHEMA_VERSION = 1
declare("zero_shot_head", schema_version=HEAD_SCHEMA_VERSION)
#: Scale of the cosine similarities (CLIP's recipe; the OpenAI models' learned logit scale is 100 too).
LOGIT_SCALE = 100.0
NUM_CLASSES = 1000
DUPLICATE_POLICIES = ("keep_first", "wordnet_lemmas")
DEFAULT_CLASS_NAMES = "open_clip.zero_shot_metadata.IMAGENET_CLASSNAMES"
DEFAULT_TEMPLATES = "open_clip.zero_shot_metadata.OPENAI_IMAGENET_TEMPLATES"
#: Safetensors metadata key of the head's provenance (a JSON document), as Parquet outputs store theirs.
METADATA_KEY = "zoomeval"


@dataclass(frozen=True)
class TextList:
    """Class names or templates, where they came from and the sha256 of their lines."""

    items: tuple[str, ...]
    source: str
    sha256: str


def _sha256_lines(items: tuple[str, ...]) -> str:
    return hashlib.sha256("".join(f"{item}\n" for item in items).encode()).hexdigest()


def _read_lines(path: str | os.PathLike[str], key: str, what: str) -> tuple[str, ...]:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{key}: {file} does not exist; point it at a text file with {what}")
    lines = tuple(file.read_text(encoding="utf-8").splitlines())
    if blank := [i + 1 for i, line in enumerate(lines) if not line.strip()]:
        raise ValueError(f"{key}: {file} line {blank[0]} is empty; the file must hold {what}")
    return lines


def class_names(path: str | os.PathLike[str] | None = None, key: str = "class_names") -> TextList:
    """The 1000 class names in ImageNet index order: open_clip's curated list, or one per line of ``path``."""
    if path is None:
        from open_clip.zero_shot_metadata import IMAGENET_CLASSNAMES

        names, source = tuple(IMAGENET_CLASSNAMES), DEFAULT_CLASS_NAMES
    else:
        names, source = _read_lines(path, key, "one class name per line"), str(path)
    if len(names) != NUM_CLASSES:
        raise ValueError(f"{key}: {source} has {len(names)} class names; it needs one per ImageNet class (1000)")
    return TextList(names, source, _sha256_lines(names))


def templates(path: str | os.PathLike[str] | None = None, key: str = "templates") -> TextList:
    """The prompt templates: open_clip's 80 OpenAI templates (callables, turned into their format strings), or
    one per line of ``path``; each must contain ``{}`` exactly once and no other brace."""
    if path is None:
        from open_clip.zero_shot_metadata import OPENAI_IMAGENET_TEMPLATES

        items, source = tuple(t("{}") for t in OPENAI_IMAGENET_TEMPLATES), DEFAULT_TEMPLATES
    else:
        what = "one template per line, each with {} where the class name goes"
        items, source = _read_lines(path, key, what), str(path)
    if not items:
        raise ValueError(f"{key}: {source} holds no templates")
    for i, template in enumerate(items, start=1):
        if template.count("{}") != 1 or template.count("{") != 1 or template.count("}") != 1:
            raise ValueError(
                f"{key}: template {i} of {source}, {template!r}, must contain {{}} exactly once (where the class "
                "name goes) and no other brace"
            )
    return TextList(items, source, _sha256_lines(items))


def duplicates(names: tuple[str, ...]) -> dict[str, list[int]]:
    """Names given to more than one class, with their indices."""
    seen: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        seen.setdefault(name, []).append(index)
    return {name: indices for name, indices in seen.items() if len(indices) > 1}


def _wordnet_lemmas(index: int) -> list[str]:
    from zoomeval.core.classes import description

    return [lemma.strip() for lemma in description(index).split(",") if lemma.strip()]


def resolve_duplicates(names: tuple[str, ...], policy: str) -> tuple[tuple[str, ...], dict[str, Any]]:
    """The names to encode under duplicate-name ``policy`` and the record of what was done: ``duplicates``
    (name -> indices), ``renamed`` (index -> new name) and ``unpredictable`` (indices ``argmax`` can never return
    over the full class set)."""
    if policy not in DUPLICATE_POLICIES:
        raise ValueError(f"duplicate_names: {policy!r} is not one of {list(DUPLICATE_POLICIES)}")
    found = duplicates(names)
    record: dict[str, Any] = {"policy": policy, "duplicates": found, "renamed": {}, "unpredictable": []}
    if policy == "keep_first":
        record["unpredictable"] = sorted(i for indices in found.values() for i in indices[1:])
        return names, record
    resolved = list(names)
    taken = {name for name in names if name not in found}
    for name, indices in found.items():
        for index in indices:
            lemma = next((lemma for lemma in _wordnet_lemmas(index) if lemma not in taken), None)
            if lemma is None:
                raise ValueError(
                    f"duplicate_names: wordnet_lemmas finds no unused WordNet lemma for class {index} ({name!r}, "
                    f"lemmas {_wordnet_lemmas(index)}); rename it in the class-name file or use keep_first"
                )
            taken.add(lemma)
            resolved[index] = lemma
            if lemma != name:
                record["renamed"][str(index)] = lemma
    return tuple(resolved), record


def compute_head(
    model: Any,
    tokenizer: Any,
    names: tuple[str, ...],
    prompts: tuple[str, ...],
    device: torch.device,
    classes_per_batch: int = 8,
) -> torch.Tensor:
    """The ``(len(names), dim)`` float32 head on the CPU. Each distinct name is encoded once (``classes_per_batch``
    names x all templates per forward pass), so equal names get bit-identical rows."""
    import torch

    distinct = list(dict.fromkeys(names))
    rows: dict[str, torch.Tensor] = {}
    with torch.inference_mode():
        for start in range(0, len(distinct), classes_per_batch):
            batch = distinct[start : start + classes_per_batch]
            tokens = tokenizer([p.format(name) for name in batch for p in prompts]).to(device)
            embeddings = model.encode_text(tokens, normalize=True).float().view(len(batch), len(prompts), -1)
            means = torch.nn.functional.normalize(embeddings.mean(dim=1), dim=-1)
            rows.update(zip(batch, means.cpu(), strict=True))
    return torch.stack([rows[name] for name in names]).contiguous()


def write_head(path: str | os.PathLike[str], head: torch.Tensor, provenance: dict[str, Any]) -> None:
    """Save the head atomically as safetensors, with ``provenance`` as a JSON document in its metadata."""
    from safetensors.torch import save

    from zoomeval.core.io import atomic_path

    document = {"kind": "zero_shot_head", "schema_version": HEAD_SCHEMA_VERSION, **provenance}
    data = save({"head": head.contiguous()}, metadata={METADATA_KEY: json.dumps(document, sort_keys=True)})
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def read_head(path: str | os.PathLike[str]) -> tuple[torch.Tensor, dict[str, Any]]:
    """The head and its provenance; refuses a file that is not a zoomeval head of this schema version."""
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        document = json.loads((fh.metadata() or {}).get(METADATA_KEY, "{}"))
        if document.get("kind") != "zero_shot_head" or document.get("schema_version") != HEAD_SCHEMA_VERSION:
            raise ValueError(
                f"{path}: not a zero-shot head of schema version {HEAD_SCHEMA_VERSION}; rebuild it "
                "(snakemake --forcerun zero_shot_head)"
            )
        return fh.get_tensor("head"), document
