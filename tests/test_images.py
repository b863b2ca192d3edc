"""Bad and unusual inputs: each is converted under the documented policy or found and left out."""

import csv
import hashlib
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from zoomeval.core.images import (
    EIGHT_BIT,
    MAX_RESIZED_PIXELS,
    NO_MAPPING,
    SIXTEEN_BIT,
    bad_kinds,
    load_rgb,
    problem,
    screen,
    to_rgb,
    too_large,
)
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import all_crops, resize_shorter, zoom_crop
from zoomeval.inference.crop_dataset import ZoomCrops
from zoomeval.inference.device_resize import plan_crops


def record(path, size, border=0):
    return Record(path.stem, str(path), [0], ["n01440764"], size[0], size[1], border=border)


def png_header_only(path, width, height):
    """A PNG that claims ``width x height`` (an IHDR and no pixels): enough for PIL's size check."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = lambda kind, data: struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))  # noqa: E731
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IEND", b""))


@pytest.fixture
def jpeg_bytes():
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (64, 80, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def test_unreadable_files_are_found_with_a_reason(tmp_path, jpeg_bytes):
    (tmp_path / "truncated.jpg").write_bytes(jpeg_bytes[: len(jpeg_bytes) // 2])
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "text.jpg").write_text("not an image")
    png_header_only(tmp_path / "bomb.png", 20000, 20000)  # 400 megapixels: over PIL's bomb limit
    (tmp_path / "good.jpg").write_bytes(jpeg_bytes)
    assert "truncated" in problem(str(tmp_path / "truncated.jpg")).lower()
    assert problem(str(tmp_path / "empty.jpg")).startswith("UnidentifiedImageError")
    assert problem(str(tmp_path / "text.jpg")).startswith("UnidentifiedImageError")
    assert problem(str(tmp_path / "bomb.png")).startswith("DecompressionBomb")
    assert problem(str(tmp_path / "good.jpg")) is None


def test_screen_lists_and_skips_or_fails(tmp_path, jpeg_bytes, caplog):
    (tmp_path / "a.jpg").write_bytes(jpeg_bytes)
    (tmp_path / "b.jpg").write_bytes(b"")
    (tmp_path / "c.jpg").write_bytes(jpeg_bytes)
    records = [record(tmp_path / n, (80, 64)) for n in ("a.jpg", "b.jpg", "c.jpg")]
    kept, excluded = screen(records, "skip", tmp_path / "bad.csv", dataset="d", max_scale=256, workers=2)
    assert [r.image_id for r in kept] == ["a", "c"] and excluded == 1
    assert {r.sha256 for r in kept} == {hashlib.sha256(jpeg_bytes).hexdigest()}  # the bytes it read, hashed
    lines = (tmp_path / "bad.csv").read_text().splitlines()
    assert lines[0] == "image_id,path,reason,source"
    assert lines[1].startswith(f"b,{tmp_path / 'b.jpg'},UnidentifiedImageError") and lines[1].endswith(",")
    assert f"bad image {tmp_path / 'b.jpg'}: UnidentifiedImageError" in caplog.text
    assert screen(kept, "fail", tmp_path / "ok.csv", dataset="d", max_scale=256) == (kept, 0)
    assert (tmp_path / "ok.csv").read_text() == "image_id,path,reason,source\n"


def test_fail_names_the_bad_images_in_its_message_not_in_a_file_that_snakemake_deletes(tmp_path, jpeg_bytes):
    (tmp_path / "good.jpg").write_bytes(jpeg_bytes)
    records = [record(tmp_path / "good.jpg", (80, 64))]
    for k in range(7):
        (tmp_path / f"bad{k}.jpg").write_bytes(b"")
        records.append(record(tmp_path / f"bad{k}.jpg", (80, 64)))
    with pytest.raises(ValueError) as info:
        screen(records, "fail", tmp_path / "bad.csv", dataset="d", max_scale=256)
    message = str(info.value)
    assert message.startswith("dataset 'd': 7 of its 8 images cannot be used: ")
    for k in range(5):
        assert f"{tmp_path / f'bad{k}.jpg'} (UnidentifiedImageError: " in message
    assert "bad5" not in message and "; and 2 more (each is listed in this job's log)" in message
    assert "on_bad_image: skip" in message and "bad.csv" not in message


def test_no_usable_image_stops_the_manifest_step(tmp_path):
    (tmp_path / "a.jpg").write_bytes(b"")
    (tmp_path / "b.jpg").write_text("not an image")
    records = [record(tmp_path / n, (8, 8)) for n in ("a.jpg", "b.jpg")]
    with pytest.raises(ValueError, match=r"dataset 'd': none of its 2 images can be used: .*a\.jpg .*fix or remove"):
        screen(records, "skip", tmp_path / "bad.csv", dataset="d", max_scale=256)


def test_a_resize_over_the_pixel_budget_is_a_bad_image(tmp_path):
    Image.new("RGB", (1, 8000), (255, 0, 0)).save(tmp_path / "long.png", optimize=True)
    assert (tmp_path / "long.png").stat().st_size < 200
    Image.new("RGB", (500, 375)).save(tmp_path / "photo.png")
    records = [record(tmp_path / "long.png", (1, 8000)), record(tmp_path / "photo.png", (500, 375))]
    kept, excluded = screen(records, "skip", tmp_path / "bad.csv", dataset="d", max_scale=256)
    assert [r.image_id for r in kept] == ["photo"] and excluded == 1
    reason = "resized to S=256 it would be 256x2048000 = 524288000 pixels, over max_resized_pixels (16777216)"
    assert list(csv.reader((tmp_path / "bad.csv").open()))[1] == ["long", str(tmp_path / "long.png"), reason, ""]
    with pytest.raises(ValueError, match="over max_resized_pixels"):
        screen(records, "fail", tmp_path / "bad.csv", dataset="d", max_scale=256)
    assert screen(records, "skip", tmp_path / "bad.csv", dataset="d", max_scale=256, max_pixels=256 * 2048000)[1] == 0


@pytest.mark.parametrize(
    ("size", "allowed"),
    [
        ((500, 375), True),
        ((375, 500), True),
        ((4000, 3000), True),
        ((100, 1600), True),
        ((100, 1601), False),
        ((1601, 100), False),
    ],
)
def test_default_budget_admits_up_to_16_to_1_at_s_1024(size, allowed):
    # 100 x 1600 becomes 1024 x 16384 = 2^24 pixels exactly; 100 x 1601 becomes 1024 x 16394.
    assert (too_large(*size, 1024, MAX_RESIZED_PIXELS) is None) is allowed
    resized = resize_shorter(Image.new("RGB", size), 1024)  # the resize inference does
    assert (resized.width * resized.height <= MAX_RESIZED_PIXELS) is allowed


def test_modes_are_converted_to_rgb_under_the_policy(tmp_path):
    rgba = Image.new("RGBA", (4, 3), (10, 20, 30, 0))  # fully transparent: the colour underneath is kept
    assert to_rgb(rgba).getpixel((0, 0)) == (10, 20, 30)
    assert to_rgb(Image.new("L", (4, 3), 77)).getpixel((1, 1)) == (77, 77, 77)
    cmyk = Image.new("CMYK", (4, 3), (0, 255, 255, 0))  # pure red in CMYK
    cmyk.save(tmp_path / "cmyk.jpg", "JPEG", quality=100)
    with Image.open(tmp_path / "cmyk.jpg") as img:
        assert img.mode == "CMYK"
        r, g, b = to_rgb(img).getpixel((1, 1))
        assert r > 240 and g < 15 and b < 15
    sixteen = np.array([[0, 256, 32768, 65535]], dtype=np.uint16)
    Image.fromarray(sixteen).save(tmp_path / "deep.png")
    with Image.open(tmp_path / "deep.png") as img:
        assert img.mode.startswith("I")
        assert [to_rgb(img).getpixel((x, 0))[0] for x in range(4)] == [0, 1, 128, 255]  # scaled, not clipped


def test_exif_orientation_is_ignored_and_tiny_images_still_zoom(tmp_path):
    pixels = np.zeros((20, 40, 3), np.uint8)
    pixels[:, :20] = 255  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 CW to display"
    Image.fromarray(pixels).save(tmp_path / "rotated.jpg", "JPEG", exif=exif, quality=100)
    image = load_rgb(record(tmp_path / "rotated.jpg", (40, 20)))
    assert image.size == (40, 20)  # stored orientation, not the displayed one
    assert image.getpixel((5, 10))[0] > 200 and image.getpixel((35, 10))[0] < 50
    Image.new("RGB", (1, 1), (200, 100, 50)).save(tmp_path / "dot.png")
    crop = np.asarray(zoom_crop(load_rgb(record(tmp_path / "dot.png", (1, 1))), 256, 1, 1))
    assert crop.shape == (224, 224, 3) and tuple(crop[100, 100]) == (200, 100, 50)


def test_border_crop_and_size_check(tmp_path):
    Image.new("RGB", (30, 20), (9, 9, 9)).save(tmp_path / "framed.png")
    assert load_rgb(record(tmp_path / "framed.png", (26, 16), border=2)).size == (26, 16)
    with pytest.raises(ValueError, match="differs from the manifest"):
        load_rgb(record(tmp_path / "framed.png", (30, 20), border=2))


#: The tiny images of the mode tests: 7 x 5 pixels, cut at two scales into 3 x 3 crops.
SIZE, SCALES, CROP = (7, 5), [4, 9], 3


def _random_bytes(count: int, seed: int) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, count, dtype=np.uint8).tobytes()


def mode_image(mode: str, values: list[float] | None = None) -> Image.Image:
    """A tiny image of ``mode``: ``values`` row by row for I and F (by default a ramp over 16 bits, or over 0..255),
    random bytes for the other modes (and a random palette for P and PA)."""
    if mode in ("I", "F"):
        ramp = range(0, 65536, 1927) if mode == "I" else range(0, 256, 7)
        array = np.array(list(ramp) if values is None else values, dtype=np.int32 if mode == "I" else np.float32)
        return Image.fromarray(np.resize(array, SIZE[::-1]))
    if mode == "1":
        count = -(-SIZE[0] // 8) * SIZE[1]  # packed bits, rows padded to a byte
    else:
        count = SIZE[0] * SIZE[1] * (2 if mode in SIXTEEN_BIT else len(Image.new(mode, (1, 1)).getbands()))
    image = Image.frombytes(mode, SIZE, _random_bytes(count, len(mode)))
    if mode in ("P", "PA"):
        image.putpalette(_random_bytes(768, 99), "RGB")
    return image


def expected_rgb(image: Image.Image) -> np.ndarray:
    """The RGB pixels the policy gives ``image``, computed apart from :func:`to_rgb` where the policy is not PIL's own
    formula (bilevel, greyscale, alpha and padding bands, palettes, 16 bits, whole floats)."""
    mode, pixels = image.mode, np.asarray(image)
    if mode in ("CMYK", "YCbCr", "LAB", "HSV", "RGBa"):  # PIL's colour formulas are the policy
        return np.asarray(image.convert("RGB"))
    if mode in ("P", "PA"):
        palette = np.frombuffer(image.palette.tobytes(), np.uint8).reshape(-1, 3)
        return palette[pixels if mode == "P" else pixels[..., 0]]
    grey = {"1": lambda: pixels.astype(np.uint8) * 255, "F": lambda: pixels.astype(np.uint8)}
    grey |= dict.fromkeys(SIXTEEN_BIT, lambda: (pixels.astype(np.int64) >> 8).astype(np.uint8))
    if mode in grey:
        return np.repeat(grey[mode]()[..., None], 3, axis=2)
    if mode in ("L", "LA"):
        return np.repeat((pixels if mode == "L" else pixels[..., 0])[..., None], 3, axis=2)
    return pixels[..., :3]  # RGB, RGBA, RGBX


#: The images that have no 8-bit mapping, with how their reason starts: mode I beyond 16 bits (a 32-bit TIFF whose
#: bright pixels used to wrap around to 204-206) or negative, floats that PIL would truncate or clip, and La.
REFUSED = {
    "I beyond 16 bits": (lambda: mode_image("I", [0, 65535, 65536, 4_000_000]), "mode I with values 0..4000000"),
    "I negative": (lambda: mode_image("I", [-1, 0, 255]), "mode I with values -1..255"),
    "F fraction": (lambda: mode_image("F", [0.0, 0.5, 255.0]), "mode F with values"),
    "F over 255": (lambda: mode_image("F", [0.0, 256.0]), "mode F with values"),
    "F NaN": (lambda: mode_image("F", [0.0, float("nan")]), "mode F with values"),
    "La": (lambda: Image.new("La", SIZE, (9, 200)), "mode La"),
}


def test_every_pil_mode_has_a_decision():
    """A mode Pillow adds fails here until the policy decides it."""
    assert set(Image.MODES) == EIGHT_BIT | SIXTEEN_BIT | {"F", "La"}


@pytest.mark.parametrize("mode", sorted(EIGHT_BIT | SIXTEEN_BIT | {"F"}))
def test_every_mode_with_a_mapping_becomes_the_documented_rgb(mode):
    image = mode_image(mode)
    assert np.array_equal(np.asarray(to_rgb(image)), expected_rgb(image))


def test_the_policys_values_by_hand():
    assert to_rgb(Image.new("I", (1, 1), 65535)).getpixel((0, 0)) == (255, 255, 255)  # not 204-206, not wrapped
    assert to_rgb(Image.new("I;16", (1, 1), 0x12AB)).getpixel((0, 0)) == (0x12, 0x12, 0x12)
    assert to_rgb(Image.new("F", (1, 1), 200.0)).getpixel((0, 0)) == (200, 200, 200)
    assert to_rgb(Image.new("RGBa", (1, 1), (100, 50, 25, 128))).getpixel((0, 0)) == (199, 99, 49)  # un-premultiplied
    assert to_rgb(Image.new("HSV", (1, 1), (0, 255, 255))).getpixel((0, 0)) == (255, 0, 0)
    assert to_rgb(Image.new("1", (1, 1), 1)).getpixel((0, 0)) == (255, 255, 255)


def stored(image: Image.Image, folder, monkeypatch) -> Record:
    """A record of ``image``: a TIFF or PNG file where one reopens in its mode with its pixels, else a path that
    ``Image.open`` is made to answer with a copy of ``image`` (HSV, RGBa, RGBX, I;16L, I;16N, La)."""
    for fmt in ("TIFF", "PNG"):
        path = folder / f"{image.mode.replace(';', '_')}.{fmt.lower()}"
        try:
            image.save(path, fmt)
        except (OSError, ValueError, KeyError):
            continue
        with Image.open(path) as back:
            if back.mode == image.mode and back.tobytes() == image.tobytes():
                return Record(path.stem, str(path), [0], [""], *SIZE)
    path = folder / f"{image.mode.replace(';', '_')}.in-memory"
    opened = Image.open
    monkeypatch.setattr(Image, "open", lambda p, *a, **k: image.copy() if str(p) == str(path) else opened(p, *a, **k))
    return Record(path.stem, str(path), [0], [""], *SIZE)


def crops_of(record: Record, backend: str) -> np.ndarray:
    _, item = ZoomCrops([record], SCALES, size=CROP, backend=backend)[0]
    return (plan_crops(item.pixels, item.plan) if backend == "device" else item).numpy()


@pytest.mark.parametrize("mode", sorted(EIGHT_BIT | SIXTEEN_BIT | {"F"}))
def test_both_crop_paths_cut_the_same_crops_from_every_mode(mode, tmp_path, monkeypatch):
    image = mode_image(mode)
    record = stored(image, tmp_path, monkeypatch)
    expected = all_crops(Image.fromarray(expected_rgb(image)), SCALES, CROP)
    assert expected.any()
    pil, device = crops_of(record, "pil"), crops_of(record, "device")
    assert np.array_equal(pil, expected) and np.array_equal(device, expected)


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_an_image_without_an_8_bit_mapping_is_a_bad_image_on_both_paths(case, tmp_path, monkeypatch):
    make, start = REFUSED[case]
    record = stored(make(), tmp_path, monkeypatch)
    reason = problem(record.path)
    assert reason.startswith(f"ValueError: {start}") and reason.endswith(NO_MAPPING), reason
    refusals = []
    for backend in ("pil", "device"):
        with pytest.raises(ValueError) as info:
            crops_of(record, backend)
        refusals.append(str(info.value))
    assert refusals == [f"{record.path}: {reason.removeprefix('ValueError: ')}"] * 2


def test_a_32_bit_tiff_beyond_16_bits_is_listed_by_kind(tmp_path):
    """The issue's case as a file: listed in bad_images.csv with its reason and counted as its own kind."""
    path = tmp_path / "deep.tif"
    mode_image("I", [0, 70000, 16_777_215]).save(path)
    with Image.open(path) as img:
        assert img.mode == "I"
    good = tmp_path / "good.png"
    Image.new("RGB", SIZE, (1, 2, 3)).save(good)
    records = [Record("deep", str(path), [0], [""], *SIZE), Record("good", str(good), [0], [""], *SIZE)]
    kept, excluded = screen(records, "skip", tmp_path / "bad.csv", dataset="d", max_scale=9)
    assert [r.image_id for r in kept] == ["good"] and excluded == 1
    row = list(csv.DictReader((tmp_path / "bad.csv").open()))[0]
    assert row["reason"] == f"ValueError: mode I with values 0..16777215, beyond 16 bits: {NO_MAPPING}"
    assert bad_kinds(tmp_path / "bad.csv") == {NO_MAPPING: 1}
