"""Bad and unusual inputs: each is converted under the documented policy or found and left out."""

import csv
import hashlib
import io
import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from zoomeval.core.images import MAX_RESIZED_PIXELS, load_rgb, problem, screen, to_rgb, too_large
from zoomeval.core.manifest import Record
from zoomeval.core.zoom import resize_shorter, zoom_crop


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
    [((500, 375), True), ((375, 500), True), ((4000, 3000), True), ((100, 1600), True), ((100, 1601), False),
     ((1601, 100), False)],
)  # fmt: skip
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
