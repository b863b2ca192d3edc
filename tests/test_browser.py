"""The per-image browser and the hard set, on a five-image dataset whose correctness is set by hand: the browser's
data, pictures and page (in headless Chromium), and the hard set read back through the imagenet_hard adapter."""

import base64
import json
import os
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from tests.chromium import CHROMIUM, Chromium
from tests.conftest import LAYOUT
from tests.test_analysis import prediction_table
from zoomeval.analysis.matrix import read_matrix, write_matrix
from zoomeval.analysis.scoring import analyze_predictions, write_analysis
from zoomeval.browser.data import (
    first_solving,
    image_codes,
    read_scored_matrices,
    sample_indices,
    write_browser_data,
)
from zoomeval.browser.hard_set import summary_rows, write_hard_set, write_summary
from zoomeval.browser.images import write_crops, write_thumbnails
from zoomeval.browser.site import write_site
from zoomeval.core.config import DatasetConfig, InputSpec
from zoomeval.core.io import write_parquet
from zoomeval.core.left_out import LeftOut
from zoomeval.core.manifest import Record, write_manifest
from zoomeval.core.zoom import Transform, transforms, zoom_crop
from zoomeval.datasets.build import build_records

# its tests share a module-scoped fixture: one process runs them all (make test's parallel pytest), built once
pytestmark = pytest.mark.xdist_group("test_browser")

ROOT = Path(__file__).resolve().parents[1]
SCALES = [64, 224, 256]
ORDER = transforms(SCALES)
MODELS = ["m1", "m2"]
VARIANTS = ["original", "fgset"]
COLOURS = [(200, 30, 30), (30, 200, 30), (30, 30, 200), (200, 200, 30), (30, 200, 200)]
LABELS = [[281, 282], [1], [2], [3], [4]]
ORIGINS = ["alpha", "alpha", "alpha", "beta", "beta"]
BOXES = [[(10, 5, 40, 30)], [], [(0, 0, 20, 20), (30, 10, 60, 40)], [(5, 5, 15, 15)], []]
# (model, variant) -> image -> the transforms (scale, row, col) that solve it; every other pair is wrong.
SOLVED = {
    ("m1", "original"): {0: [(256, 1, 1), (224, 0, 0)], 2: [(64, 0, 0), (64, 1, 1)], 3: [(256, 0, 0), (256, 2, 2)]},
    ("m2", "original"): {0: [(256, 1, 1)], 3: [(256, 0, 1)]},
    ("m1", "fgset"): {0: [(256, 1, 1)], 3: [(256, 0, 0)]},
    ("m2", "fgset"): {1: [(64, 2, 2)]},
}
# Hand-derived from SOLVED, summed over both models on the original images.
UNSOLVED = [1, 4]  # the hard set
ZOOM_IN_ONLY = [3]  # image 0 is solved at S = 224 too
ZOOM_OUT_ONLY = [2]
BACKGROUND_NEEDED = [2]  # solved on the original, by no model on FGSet
BACKGROUND_HURTS = [1]
FEWEST_FIRST = [1, 4, 2, 0, 3]  # 0, 0, 2, 3, 3 solving transforms
MOST_FIRST = [0, 3, 2, 1, 4]


def write_fixture(root: Path) -> dict:
    """Images, manifest, prediction files and their analyses (as the workflow writes them) under ``root``."""
    records = []
    for k, colour in enumerate(COLOURS):
        path = root / "images" / f"img{k}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        pixels = np.zeros((40 + 10 * k, 64, 3), np.uint8)
        pixels[...] = colour
        pixels[:, : 8 * (k + 1)] = 255  # something for the crops to tell apart
        Image.fromarray(pixels).save(path)
        records.append(Record(f"img{k}", str(path), LABELS[k], [], 64, 40 + 10 * k, BOXES[k], ORIGINS[k]))
    write_manifest(root / "manifest.parquet", records, "toy")
    files = {"records": records, "matrices": {}, "covers": {}, "predictions": {}}
    for (model, variant), solved in SOLVED.items():
        rows = [(r.image_id, t) for r in records for t in ORDER]
        preds = [
            r.labels[0] if (t.scale, t.row, t.col) in solved.get(k, []) else (r.labels[0] + 500) % 1000
            for k, r in enumerate(records)
            for t in ORDER
        ]
        path = root / "predictions" / variant / f"{model}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "model": {"name": model},
            "variant": variant,
            "dataset": "toy",
            "scales": SCALES,
            "class_set": "full",
            "crop_size": 32,
        }
        write_parquet(path, prediction_table(rows, preds), meta)
        out = root / "analysis" / variant / model
        out.mkdir(parents=True)
        write_analysis(
            analyze_predictions(path, records, top_k=3), out / "metrics.json", out / "cover.json", out / "correct.npz"
        )
        files["matrices"][model, variant] = out / "correct.npz"
        files["predictions"][model, variant] = path
        files["covers"][model, variant] = out / "cover.json"
    return files


def read_back(path: Path, image_dir: Path) -> list[Record]:
    """The records of a hard set as the workflow reads a dataset entry ``{adapter: imagenet_hard, parquet: path}``."""
    entry = DatasetConfig(
        "hard", "imagenet_hard", {"parquet": InputSpec(path=str(path), plain=True)}, variants=("original",)
    )
    records, _ = build_records(entry, {"parquet": path}, image_dir)
    return records


def build_browser(files: dict, out: Path, page_size: int = 2) -> None:
    correctness = read_scored_matrices(files["matrices"])
    covers = {m: files["covers"][m, "original"] for m in MODELS}
    write_browser_data(
        out / "data" / "toy",
        scored="toy",
        dataset="toy",
        label_set="in",
        records=files["records"],
        correctness=correctness,
        covers=covers,
        predictions={m: files["predictions"][m, "original"] for m in MODELS},
        max_images=100,
        page_size=page_size,
        predictions_shown=2,
        shard_images=2,
        bad={"unreadable": 1},
    )
    write_thumbnails(files["records"], out / "thumbnails" / "toy", max_images=100, size=32)
    original = read_scored_matrices({(m, "original"): files["matrices"][m, "original"] for m in MODELS})
    write_crops(
        files["records"],
        "in",
        original,
        covers,
        out / "crops" / "toy",
        max_images=100,
        size=32,
        crop_sizes={"m1": 32, "m2": 32},
    )
    write_site(out, [{"name": "toy", "dataset": "toy", "label_set": "in"}])


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("browser")
    files = write_fixture(root)
    build_browser(files, root / "browser")
    return files, root / "browser"


def data_call(path: Path) -> list:
    """The JSON arguments of a data file ``zoomBrowser.<call>(a, b, ...);``."""
    text = path.read_text()
    return json.loads("[" + text[text.index("(") + 1 : text.rindex(")")] + "]")


def test_sample_is_spread_evenly_over_the_manifest():
    assert sample_indices(10, 4).tolist() == [0, 2, 5, 7]
    assert sample_indices(3, 5).tolist() == [0, 1, 2]
    assert len(set(sample_indices(50_000, 2000).tolist())) == 2000


def test_codes_and_first_solving_transform_by_hand():
    order = transforms([64, 224, 256])
    matrix = np.zeros((27, 4), bool)
    rows = {t: i for i, t in enumerate(order)}
    matrix[rows[Transform(256, 0, 0)], 0] = matrix[rows[Transform(224, 1, 1)], 0] = True  # in and 224
    matrix[rows[Transform(64, 2, 2)], 1] = True  # out only
    matrix[rows[Transform(256, 1, 1)], 2] = matrix[rows[Transform(256, 2, 0)], 2] = True  # in only
    assert image_codes(matrix, order).tolist() == [8, 4 + 2, 8 + 1, 0]
    greedy = [rows[Transform(256, 1, 1)], rows[Transform(224, 1, 1)], rows[Transform(64, 2, 2)]]
    assert first_solving(matrix, greedy).tolist() == [greedy[1], greedy[2], greedy[0], -1]
    with pytest.raises(ValueError, match="does not belong"):
        first_solving(matrix, greedy[:2])


def test_index_and_pages_hold_the_matrices(built):
    files, out = built
    (index,) = data_call(out / "data" / "toy" / "index.js")
    assert index["models"] == MODELS and index["variants"] == VARIANTS and index["scales"] == SCALES
    assert index["origins"] == ["alpha", "beta"] and index["origin"] == [0, 0, 0, 1, 1]
    assert index["one_crop"] == ORDER.index(Transform(256, 1, 1))
    assert index["schema_version"] == 2 and index["left_out"] == {
        "n_bad": 1,
        "n_unscored": 0,
        "why": f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='toy')})",
    }
    # m1 original: image 0 by 256 and 224 (neither flag), 2 by two zoom-outs, 3 by two zoom-ins
    assert index["codes"][0][0] == [8, 0, 8 + 2, 8 + 1, 0]
    assert index["codes"][1][1] == [0, 4 + 2, 0, 0, 0]  # m2 fgset
    pages = sorted((out / "data" / "toy" / "pages").iterdir())
    assert [p.name for p in pages] == ["00000.js", "00001.js", "00002.js"]
    images = [image for p in pages for image in data_call(p)[2]]
    assert [i["id"] for i in images] == [f"img{k}" for k in range(5)]
    assert images[2]["boxes"] == [[0, 0, 20, 20], [30, 10, 60, 40]] and images[0]["labels"] == [281, 282]
    for m, model in enumerate(MODELS):
        for v, variant in enumerate(VARIANTS):
            for k, image in enumerate(images):
                bits = np.unpackbits(np.frombuffer(base64.b64decode(image["heat"][m][v]), np.uint8))[: len(ORDER)]
                assert [ORDER[t] for t in np.flatnonzero(bits)] == sorted(
                    (Transform(*t) for t in SOLVED[model, variant].get(k, [])), key=ORDER.index
                )
    # m1's greedy cover: every transform solves one image, so ties go by the transform order: 64@(0,0) (image 2),
    # 224@(0,0) (image 0), 256@(0,0) (image 3). Listed: the 1-crop, then the first two picks.
    one, first, second = (ORDER.index(Transform(*t)) for t in [(256, 1, 1), (64, 0, 0), (224, 0, 0)])
    assert images[0]["models"][0] == {"first": second, "preds": [[one, 281], [first, 781], [second, 281]]}
    # m2 solves image 3 at anchor (0, 1), which comes before image 0's (1, 1)
    assert index["greedy"] == [[first, second], [ORDER.index(Transform(256, 0, 1)), one]]
    assert images[2]["models"][0]["first"] == first and images[4]["models"][0]["first"] == -1
    assert images[4]["models"][0]["preds"][0] == [one, 504]


def test_thumbnails_and_first_solving_crops(built):
    files, out = built
    thumbs = sorted(p.name for p in (out / "thumbnails" / "toy").iterdir())
    assert thumbs == [f"{k:06d}.jpg" for k in range(5)]
    with Image.open(out / "thumbnails" / "toy" / "000004.jpg") as thumb:
        assert thumb.size == (26, 32)  # 64 x 80: the longer side to 32, 25.6 rounded
    # a crop per (image, model) that the model solves on the original images
    crops = sorted(p.name for p in (out / "crops" / "toy").iterdir())
    assert crops == ["000000_m1.jpg", "000000_m2.jpg", "000002_m1.jpg", "000003_m1.jpg", "000003_m2.jpg"]
    with Image.open(files["records"][3].path) as image:
        expected = np.asarray(zoom_crop(image, 256, 0, 0, 32), dtype=float)  # m1's first pick for image 3
        other = np.asarray(zoom_crop(image, 256, 2, 2, 32), dtype=float)
    with Image.open(out / "crops" / "toy" / "000003_m1.jpg") as crop:
        got = np.asarray(crop.convert("RGB"), dtype=float)
    assert np.abs(got - expected).mean() < 4 < np.abs(got - other).mean()


def test_hard_set_reads_back_through_the_imagenet_hard_adapter(built, tmp_path):
    files, _ = built
    correctness = read_scored_matrices({(m, "original"): files["matrices"][m, "original"] for m in MODELS})
    path = tmp_path / "toy.parquet"
    bad = {"unreadable": 1}  # one more image of the dataset was left out as bad
    assert write_hard_set(path, files["records"], "in", correctness, name="toy", dataset="toy", bad=bad) == len(
        UNSOLVED
    )
    table = pq.read_table(path)
    assert str(table.schema.field("image").type) == "struct<bytes: binary, path: string>"
    assert str(table.schema.field("label").type) == "list<element: int64>"
    assert table["english_label"].to_pylist() == [["goldfish, Carassius auratus"], ["hammerhead, hammerhead shark"]]
    assert json.loads(table.schema.metadata[b"huggingface"])["info"]["features"]["image"] == {"_type": "Image"}
    records = read_back(path, tmp_path / "images")
    hard = [files["records"][k] for k in UNSOLVED]
    assert [r.labels for r in records] == [r.labels for r in hard]
    assert [r.origin for r in records] == [r.origin for r in hard]
    assert [Path(r.path).read_bytes() for r in records] == [Path(r.path).read_bytes() for r in hard]
    assert [(r.width, r.height) for r in records] == [(r.width, r.height) for r in hard]
    # composition: one of the three alpha images, one of the two beta images
    rows, lefts = summary_rows([path])
    assert rows == [
        ["toy", "alpha", "3", "1", "33.33", "50.00"],
        ["toy", "beta", "2", "1", "50.00", "50.00"],
        ["toy", "all", "5", "2", "40.00", "100.00"],
    ]
    assert lefts == {"toy": LeftOut("toy", bad, {})}
    write_summary([path], tmp_path / "s.csv", tmp_path / "s.md")
    why = f"1 bad (1 unreadable, listed in {LAYOUT.path('bad_images', dataset='toy')})"
    assert (tmp_path / "s.csv").read_text().splitlines()[1:2] == [f'toy,alpha,3,1,33.33,50.00,1,0,"{why}"']
    assert f"toy: {why}." in (tmp_path / "s.md").read_text()


def test_hard_set_refuses_a_matrix_of_other_images(built, tmp_path):
    files, _ = built
    correctness = read_scored_matrices({(m, "original"): files["matrices"][m, "original"] for m in MODELS})
    with pytest.raises(ValueError, match="do not belong to the manifest"):
        write_hard_set(tmp_path / "x.parquet", files["records"][:4], "in", correctness, name="toy", dataset="toy")


# ------------------------------------------------------------------------------------------- the page in Chromium

needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (.ci/run installs it)")
ARTIFACTS = Path(os.environ.get("ZOOMEVAL_TEST_ARTIFACTS", ROOT / "test-artifacts"))
READY = "document.body?.dataset.ready === '1'"
SOLVED_RGB = [27, 127, 95]  # the page's colour of a solved cell (browser.js SOLVED)
CELL = 4  # canvas pixels per cell (browser.js CELL)


@pytest.fixture(scope="module")
def page(built, tmp_path_factory):
    _, out = built
    with Chromium(tmp_path_factory.mktemp("profile")) as chrome:
        chrome.open((out / "index.html").as_uri())
        chrome.wait_for(READY)
        yield chrome


def choose(chrome: Chromium, **values: str) -> None:
    """Pick each control's value as a user does (a change event), waiting for the page to render."""
    for control, value in values.items():
        chrome.evaluate(
            f"(() => {{ const s = document.getElementById({json.dumps(control)}); "
            f"s.value = {json.dumps(value)}; s.dispatchEvent(new Event('change')); }})()"
        )
        chrome.wait_for(READY)


def shown_on_all_pages(chrome: Chromium) -> list[str]:
    """The images the page shows, page by page (clicking "next" until it is disabled)."""
    cards = "[...document.querySelectorAll('article.card')].map(a => a.dataset.image)"
    ids = chrome.evaluate(cards)
    while not chrome.evaluate("document.getElementById('next').disabled"):
        chrome.evaluate("document.getElementById('next').click()")
        chrome.wait_for(READY)
        ids += chrome.evaluate(cards)
    return ids


@needs_chromium
def test_first_page_loads_without_errors(page):
    assert page.evaluate("document.getElementById('status').textContent") == (
        "5 of 5 images · page 1 of 3 · left out of toy: 1 bad (1 unreadable, listed in "
        f"{LAYOUT.path('bad_images', dataset='toy')})"
    )
    assert page.evaluate("[...document.querySelectorAll('article.card')].map(a => a.dataset.image)") == ["img0", "img1"]
    page.wait_for("[...document.images].every(i => i.complete)")
    # two thumbnails and the crops of image 0 (both models solve it; nothing solves image 1)
    assert page.evaluate("[...document.images].map(i => i.naturalWidth > 0)") == [True] * 4
    assert page.evaluate("document.querySelectorAll('article.card')[0].querySelectorAll('.thumb rect').length") == 1
    page.screenshot(ARTIFACTS / "browser_first_page.png")
    assert page.errors == []


def ids(positions: list[int]) -> list[str]:
    return [f"img{k}" for k in positions]


@needs_chromium
@pytest.mark.parametrize(
    ("controls", "expected"),
    [
        ({"filter": "all"}, ids([0, 1, 2, 3, 4])),
        ({"filter": "unsolved"}, ids(UNSOLVED)),
        ({"filter": "solved"}, ids([0, 2, 3])),
        ({"filter": "zoom_in"}, ids(ZOOM_IN_ONLY)),
        ({"filter": "zoom_out"}, ids(ZOOM_OUT_ONLY)),
        ({"filter": "background_needed"}, ids(BACKGROUND_NEEDED)),
        ({"filter": "background_hurts"}, ids(BACKGROUND_HURTS)),
        ({"model": "m2", "filter": "unsolved"}, ids([1, 2, 4])),
        ({"model": "m2", "filter": "zoom_in"}, ids([0, 3])),  # m2 solves image 0 by the 1-crop alone
        ({"origin": "beta"}, ids([3, 4])),
        ({"origin": "beta", "filter": "unsolved"}, ids([4])),
        ({"sort": "fewest"}, ids(FEWEST_FIRST)),
        ({"sort": "most"}, ids(MOST_FIRST)),
    ],
)
def test_filters_and_sorting_change_what_is_shown(page, controls, expected):
    choose(page, model="", origin="", filter="all", sort="order")
    choose(page, **controls)
    assert shown_on_all_pages(page) == expected
    assert page.errors == []


@needs_chromium
def test_heat_map_cells_match_the_correctness_matrix(page, built):
    files, _ = built
    choose(page, model="", origin="", filter="all", sort="order")
    read = (
        "[...document.querySelectorAll('canvas')].map(c => ({model: c.dataset.model, variant: c.dataset.variant, "
        "image: c.dataset.image, width: c.width, height: c.height, "
        "pixels: [...c.getContext('2d').getImageData(0, 0, c.width, c.height).data]}))"
    )
    canvases = page.evaluate(read)
    while not page.evaluate("document.getElementById('next').disabled"):
        page.evaluate("document.getElementById('next').click()")
        page.wait_for(READY)
        canvases += page.evaluate(read)
    assert len(canvases) == 5 * len(MODELS) * len(VARIANTS)
    ranked = sorted(SCALES)
    for canvas in canvases:
        matrix, order, image_ids = read_matrix(files["matrices"][canvas["model"], canvas["variant"]])
        pixels = np.array(canvas["pixels"], np.uint8).reshape(canvas["height"], canvas["width"], 4)
        assert pixels.shape[:2] == (9 * CELL, len(SCALES) * CELL)
        drawn = [
            (pixels[(3 * t.row + t.col) * CELL + 2, ranked.index(t.scale) * CELL + 2, :3] == SOLVED_RGB).all()
            for t in order
        ]
        assert drawn == matrix[:, image_ids.index(canvas["image"])].tolist(), canvas["image"]
    assert page.errors == []


def test_matrices_of_other_images_are_refused(built, tmp_path):
    files, _ = built
    matrix, order, _ = read_matrix(files["matrices"]["m1", "original"])
    other = tmp_path / "other.npz"
    write_matrix(other, matrix[:, :4], order, files["records"][:4], 32)
    with pytest.raises(ValueError, match="different images or transforms"):
        read_scored_matrices({("m1", "original"): files["matrices"]["m1", "original"], ("m2", "original"): other})
