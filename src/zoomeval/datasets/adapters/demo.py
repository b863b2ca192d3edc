"""The embedded demo dataset: ImageNet-style scenes made offline from photos that ship in packages.

Each scene pastes one to three real photos of known ImageNet classes (from scikit-image's ``data``
folder) at a recorded size and position onto a real background texture (scikit-image's grass, gravel
and brick). Some objects are small and off-centre, where zooming in should help; some are large and
central. The boxes are the paste rectangles. Generation is deterministic: the layout is the table
below and the background offsets come from a fixed seed, so reruns write byte-identical PNGs.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image

from zoomeval.core.classes import wnids_of
from zoomeval.core.io import atomic_path
from zoomeval.core.manifest import Record
from zoomeval.datasets.registry import ADAPTERS, Adapted

SEED = 20230411


@dataclass(frozen=True)
class Photo:
    """A photo that ships in an installed package, and the ImageNet classes it shows.

    Where ImageNet splits one object into near-synonyms (tabby / tiger cat, espresso / cup) the photo
    carries both, as ImageNet-ReaL would; a prediction of either is correct.
    """

    loader: str
    labels: tuple[int, ...]


#: Checked with the embedded model (tests/test_demo.py): each clean photo's top-1 is one of its labels.
PHOTOS: dict[str, Photo] = {
    "chelsea": Photo("skimage:chelsea.png", (281, 282)),  # tabby cat / tiger cat
    "coffee": Photo("skimage:coffee.png", (967, 968)),  # espresso / cup
    "rocket": Photo("skimage:rocket.jpg", (657, 744)),  # missile / projectile
    "motorcycle_left": Photo("skimage:motorcycle_left.png", (665, 670)),  # moped / motor scooter
    "motorcycle_right": Photo("skimage:motorcycle_right.png", (665, 670)),
    "camera": Photo("skimage:camera.png", (872,)),  # tripod (the cameraman's camera stands on one)
}

#: Background textures, each a grey scikit-image texture tinted to a plausible colour.
BACKGROUNDS: dict[str, tuple[float, float, float]] = {
    "grass": (0.55, 0.85, 0.40),
    "gravel": (0.80, 0.78, 0.74),
    "brick": (0.90, 0.55, 0.45),
}


@dataclass(frozen=True)
class Placement:
    photo: str
    width: int  # pasted width in pixels; the height keeps the photo's aspect ratio
    x: int  # left edge
    y: int  # top edge


@dataclass(frozen=True)
class Scene:
    background: str
    size: tuple[int, int]  # (width, height)
    objects: tuple[Placement, ...]


SCENES: tuple[Scene, ...] = (
    # large and central
    Scene("grass", (640, 480), (Placement("chelsea", 420, 110, 60),)),
    Scene("brick", (640, 480), (Placement("coffee", 400, 120, 70),)),
    Scene("gravel", (480, 640), (Placement("camera", 360, 60, 140),)),
    Scene("grass", (640, 480), (Placement("motorcycle_left", 440, 100, 90),)),
    # small and off-centre: zoom should help
    Scene("gravel", (640, 480), (Placement("chelsea", 130, 24, 30),)),
    Scene("grass", (640, 480), (Placement("coffee", 120, 490, 340),)),
    Scene("brick", (800, 600), (Placement("camera", 120, 650, 40),)),
    Scene("gravel", (480, 640), (Placement("rocket", 110, 20, 440),)),
    Scene("grass", (720, 480), (Placement("motorcycle_right", 150, 540, 330),)),
    # two or three objects
    Scene("gravel", (640, 480), (Placement("chelsea", 200, 30, 150), Placement("coffee", 180, 420, 40))),
    Scene(
        "brick",
        (720, 540),
        (Placement("rocket", 150, 40, 40), Placement("chelsea", 160, 280, 300), Placement("coffee", 130, 560, 60)),
    ),
    Scene("grass", (640, 480), (Placement("motorcycle_right", 220, 380, 280), Placement("camera", 170, 40, 60))),
)


def clutter_scenes(count: int = 8) -> tuple[Scene, ...]:
    """Cluttered scenes: 3 to 6 small objects each, in distinct cells of a 3x3 grid (so boxes never
    overlap), at seeded sizes and offsets. They give the demo a second dataset whose distribution of
    objects per image differs from :data:`SCENES` (1 to 3), for the Mann-Whitney test."""
    rng = np.random.default_rng(SEED + 1)
    names = sorted(PHOTOS)
    width, height = 720, 540
    cell_w, cell_h = width // 3, height // 3
    scenes = []
    for k in range(count):
        cells = rng.permutation(9)[: 3 + k % 4]
        objects = []
        for j, cell in enumerate(int(c) for c in cells):
            w = int(rng.integers(90, 150))
            h_max = w + 1  # no photo is taller than wide, so the object fits its cell
            x = (cell % 3) * cell_w + int(rng.integers(0, cell_w - w))
            y = (cell // 3) * cell_h + int(rng.integers(0, cell_h - h_max))
            objects.append(Placement(names[(k + j) % len(names)], w, x, y))
        scenes.append(Scene(("grass", "gravel", "brick")[k % 3], (width, height), tuple(objects)))
    return tuple(scenes)


#: Scene sets of the ``demo`` adapter (its ``scenes`` config key).
SCENE_SETS = {"standard": lambda: SCENES, "clutter": clutter_scenes}


def load_photo(loader: str) -> Image.Image:
    """A packaged photo as RGB: ``skimage:<file in skimage.data.data_dir>``."""
    source, name = loader.split(":", 1)
    if source != "skimage":
        raise ValueError(f"unknown photo source {loader!r}")
    import skimage.data

    with Image.open(Path(skimage.data.data_dir) / name) as img:
        return img.convert("RGB")


@cache
def _texture(name: str) -> np.ndarray:
    import skimage.data

    return np.asarray(getattr(skimage.data, name)(), dtype=np.float32)


def background(name: str, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A tinted texture covering ``size``: the grey texture is mirrored into tiles, then cut at a seeded offset."""
    width, height = size
    grey = _texture(name)
    tiled = np.tile(np.concatenate([grey, grey[:, ::-1]], axis=1), (3, 2))
    tiled = np.concatenate([tiled, tiled[::-1]], axis=0)
    y0 = int(rng.integers(0, tiled.shape[0] - height))
    x0 = int(rng.integers(0, tiled.shape[1] - width))
    patch = tiled[y0 : y0 + height, x0 : x0 + width, None] * np.array(BACKGROUNDS[name], np.float32)
    return Image.fromarray(np.clip(patch, 0, 255).round().astype(np.uint8), "RGB")


def render(scene: Scene, rng: np.random.Generator) -> tuple[Image.Image, list[tuple[int, int, int, int]]]:
    """The scene image and its object boxes ``[xmin, ymin, xmax, ymax]`` (half-open)."""
    canvas = background(scene.background, scene.size, rng)
    boxes = []
    for p in scene.objects:
        photo = load_photo(PHOTOS[p.photo].loader)
        height = round(p.width * photo.height / photo.width)
        canvas.paste(photo.resize((p.width, height), Image.Resampling.LANCZOS), (p.x, p.y))
        box = (p.x, p.y, p.x + p.width, p.y + height)
        if box[2] > scene.size[0] or box[3] > scene.size[1]:
            raise ValueError(f"{p} does not fit in a {scene.size} scene")
        boxes.append(box)
    return canvas, boxes


def build_demo(image_dir: Path, scenes: str = "standard") -> list[Record]:
    """Write the demo scenes (``standard`` or ``clutter``) as PNGs under ``image_dir``; return their records."""
    rng = np.random.default_rng(SEED)
    image_dir.mkdir(parents=True, exist_ok=True)
    records = []
    for k, scene in enumerate(SCENE_SETS[scenes]()):
        image, boxes = render(scene, rng)
        image_id = f"demo_{k:03d}"
        path = image_dir / f"{image_id}.png"
        with atomic_path(path) as tmp:
            image.save(tmp, format="PNG")
        labels = sorted({label for p in scene.objects for label in PHOTOS[p.photo].labels})
        records.append(
            Record(
                image_id=image_id,
                path=str(path),
                labels=labels,
                wnids=wnids_of(labels),
                width=image.width,
                height=image.height,
                boxes=boxes,
                origin="demo",
            )
        )
    return records


@ADAPTERS.register(
    "demo",
    options=("scenes",),
    boxes=True,
    images=True,
    most_images=lambda scenes="standard": len(SCENE_SETS[scenes]()),
)
def demo(image_dir: Path, scenes: str = "standard") -> Adapted:
    """The embedded demo scenes (``standard`` or ``clutter``), generated offline into ``image_dir``."""
    return build_demo(image_dir, scenes), None
