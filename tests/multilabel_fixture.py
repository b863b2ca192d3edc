"""A human_accuracy_v3.0.0.json in the published shape (see zoomeval.datasets.multilabel), for a few images."""

TENCH, GOLDFISH, SHARK, CHIHUAHUA = "n01440764", "n01443537", "n01484850", "n02085620"  # 0, 1, 2, 151
ANALOG_CLOCK, DIGITAL_CLOCK, TOILET_TISSUE = "n02708093", "n03196217", "n15075141"  # 409, 530, 999


def val(number: int) -> str:
    return f"ILSVRC2012_val_{number:08d}.JPEG"


def v2_id(digit: str) -> str:
    """An ImageNet-V2 candidate id (40 hex digits)."""
    return digit * 40


def flagged(reviewer: str) -> dict:
    """A problematic_images value as published (only the key is used)."""
    return {
        "reason": "marked as problematic in the review server",
        "reviewer": reviewer,
        "server_username": reviewer,
        "time_marked": "2019-03-29T22:48:36.956685+00:00",
        "time_reviewed": "2019-03-29T22:49:32.290916+00:00",
    }


def document(initial_annots: dict, problematic: list[str], imagenet_m: list[str]) -> dict:
    """The three keys the public loaders read, and one they do not (ignored)."""
    return {
        "initial_annots": initial_annots,
        "problematic_images": {name: flagged("ludwig") for name in problematic},
        "imagenet_m": imagenet_m,
        "annotation_metadata": {"not": "read"},
    }


# Keys with an empty list are absent, as in the published file; the key order inside an entry varies there too.
ANNOTATIONS = document(
    {
        val(1): {"correct": [TENCH, GOLDFISH]},
        val(2): {"unclear": [CHIHUAHUA]},  # only unclear: never correct for multi-label accuracy
        val(3): {"correct": [TOILET_TISSUE]},  # problematic
        # val(4) is not annotated
        val(5): {"wrong": [ANALOG_CLOCK], "correct": [DIGITAL_CLOCK]},
        val(6): {"wrong": [TENCH], "unclear": [GOLDFISH]},
        val(7): {"correct": [TENCH]},
        v2_id("a"): {"correct": [TENCH]},
        v2_id("b"): {"correct": [ANALOG_CLOCK, DIGITAL_CLOCK], "wrong": [TOILET_TISSUE]},
        v2_id("d"): {"correct": [SHARK]},  # an ImageNet-V2 image the dataset does not have
    },
    problematic=[val(3), val(64)],  # val(64) is flagged but not annotated, as in the published file
    imagenet_m=[val(2), val(3), val(5)],
)
