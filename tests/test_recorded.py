"""A model rebuilt from a record it did not write (zoomeval.inference.recorded): nothing a record says becomes a path
or a download. A checkpoint record's weights are found only in the reader's resources, by their sha256; a path in
the architecture, a checkpoint path of the reader's own files and a URL are refused in one line with nothing
created, linked, hashed or fetched."""

from pathlib import Path

import pytest
import torch
import torchvision

from zoomeval.core.checksums import sha256_file
from zoomeval.inference.models import fetch_weights, load_model, weights_folder
from zoomeval.inference.recorded import recorded_model, recorded_spec

ARCH = "mobilenet_v3_small"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> tuple[Path, str]:
    """A random-init torchvision state dict saved as a file, and its sha256."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("own") / "weights.pth"
    torch.save(torchvision.models.get_model(ARCH, weights=None).state_dict(), path)
    return path, sha256_file(path)


def record(where: object, sha256: str, **changes: object) -> dict[str, object]:
    """A prediction file's ``model`` record of a ``checkpoint`` entry."""
    return {
        "name": "ckpt",
        "source": "checkpoint",
        "architecture": ARCH,
        "weights": sha256,
        "input_size": 224,
        "checkpoint": where,
        "weights_sha256": sha256,
        **changes,
    }


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")) if folder.exists() else []


def test_a_checkpoint_record_finds_its_weights_in_the_readers_resources_by_sha256(checkpoint, tmp_path) -> None:
    path, sha = checkpoint
    resources = tmp_path / "resources"
    entry = record(str(path), sha)
    fetch_weights(recorded_spec(entry), Path(str(weights_folder(recorded_spec(entry), str(resources)))))
    placed = resources / "weights" / "checkpoint" / f"{ARCH}.{sha}" / f"{sha}.pth"
    assert placed.is_file()
    # the record's path is gone: the weights are found where the reader keeps them
    spec, folder = recorded_model(record("/elsewhere/gone.pth", sha), resources, fetch=False)
    assert (spec.checkpoint, folder) == ({"path": str(placed)}, placed.parent)
    assert load_model(spec, folder).weights_sha256 == sha


@pytest.mark.parametrize("fetch", [True, False])
def test_a_record_naming_a_readers_own_file_reads_nothing_of_it(checkpoint, tmp_path, fetch) -> None:
    """A record whose checkpoint is a file of the reader's (pinned by its sha256) is not hashed, linked or copied
    into the resources, nor remembered in their checksum file."""
    path, sha = checkpoint
    resources = tmp_path / "resources"
    resources.mkdir()
    with pytest.raises(ValueError, match=f"the recorded model: no weights file with sha256 {sha[:12]} under ") as e:
        recorded_model(record(str(path), sha), resources, fetch=fetch)
    assert "\n" not in str(e.value)
    assert files_under(resources) == []


def test_a_checkpoint_url_in_a_record_is_not_fetched(checkpoint, tmp_path, monkeypatch) -> None:
    import zoomeval.datasets.download as download

    monkeypatch.setattr(download, "download", lambda *a, **k: pytest.fail("fetched a URL a record named"))
    path, sha = checkpoint
    with pytest.raises(ValueError, match="no weights file with sha256"):
        recorded_model(record({"url": "http://127.0.0.1:9/x.pth"}, sha), tmp_path / "resources", fetch=True)
    assert files_under(tmp_path / "resources") == []


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"architecture": "../../../../outside/X"}, "architecture '../../../../outside/X' is not a name"),
        ({"architecture": "/abs"}, "architecture '/abs' is not a name"),
        ({"weights": "../x"}, "weights '../x' is not a name"),
        ({"source": "nonsense"}, "unknown model source 'nonsense'"),
        ({"source": "timm", "architecture": "no_such_net", "checkpoint": None}, "'no_such_net' is not a timm"),
        ({"weights_sha256": "../x"}, "weights_sha256 '../x' is no sha256"),
        ({"name": None, "source": None}, "unknown model source None"),
    ],
)
def test_a_record_with_a_path_or_an_unknown_model_is_refused_in_one_line(checkpoint, tmp_path, changes, message):
    """Nothing is created anywhere: not beside the resources, where the architecture's path would lead."""
    path, sha = checkpoint
    resources = tmp_path / "a" / "b" / "resources"
    with pytest.raises(ValueError, match=f"^the recorded model: .*{message}") as e:
        recorded_model(record(str(path), sha, **changes), resources, fetch=True)
    assert "\n" not in str(e.value)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("entry", [None, [], "x", {"source": "timm"}])
def test_what_is_no_record_is_refused_in_one_line(entry) -> None:
    with pytest.raises(ValueError, match="^where: "):
        recorded_spec(entry, "where")


def test_a_records_local_head_files_are_not_read(tmp_path) -> None:
    entry = {"name": "c", "source": "open_clip", "architecture": "ViT-B-32", "weights": "openai", "input_size": 224}
    with pytest.raises(ValueError, match=r"it names local files \(templates\)"):
        recorded_spec({**entry, "options": {"templates": "/etc/passwd"}})
