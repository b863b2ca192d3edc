"""Every Eval Ever records of one verified result (:mod:`zoomeval.publish.bundle`): the aggregate record and its
instance-level lines, in that schema's version :data:`EEE_SCHEMA_VERSION`."""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from zoomeval.core.layout import Layout
from zoomeval.core.zoom import ONE_CROP, ZoomGrid
from zoomeval.publish.leaderboard import ACCURACIES, METRICS, hub_dataset, scored
from zoomeval.study.verified import scored_records

#: The Every Eval Ever schema version the records follow.
EEE_SCHEMA_VERSION = "0.3.0"


def evaluation_id(row: dict[str, Any]) -> str:
    return f"zoomeval/{scored(row)}/{row['variant']}/{row['model']}/{row['key_sha256'][:12]}"


def instance_lines(directory: Path, row: dict[str, Any], layout: Layout) -> list[dict[str, Any]]:
    """Per scored image, its prediction and correctness under the 1-crop transform, any transform (the first that
    is correct, in the authors' order) and, on original images, the standard evaluation, as the analysis scores
    them."""
    import polars as pl

    from zoomeval.analysis.matrix import correctness_matrix
    from zoomeval.analysis.standard_scores import standard_correct

    _, result = row["source"]
    records = scored_records(directory, row["key"], layout)
    grid = ZoomGrid(row["scales"])
    order = list(grid.transforms)
    matrix = correctness_matrix(result.inputs["predictions"], records, order)
    one = pl.read_parquet(result.inputs["predictions"]).filter(
        (pl.col("scale") == ONE_CROP[0]) & (pl.col("row") == ONE_CROP[1]) & (pl.col("col") == ONE_CROP[2])
    )
    picks = dict(zip(one["image_id"].cast(pl.String), one["pred"], strict=True))
    first = [order[int(t)].name if matrix[t, i] else "" for i, t in enumerate(matrix.argmax(axis=0))]
    answers = {
        "acc_1crop": ([str(picks[r.image_id]) for r in records], matrix[grid.index(*ONE_CROP)]),
        "acc_max": (first, matrix.any(axis=0)),
    }
    if row["acc_standard"] is not None:
        standard = pl.read_parquet(result.inputs["standard"])
        preds = dict(zip(standard["image_id"].cast(pl.String), standard["pred"], strict=True))
        answers["acc_standard"] = ([str(preds[r.image_id]) for r in records], standard_correct(standard, records))
    return [
        _instance(row, metric, record, answer, bool(hit))
        for metric, (given, correct) in answers.items()
        for record, answer, hit in zip(records, given, correct, strict=True)
    ]


def _instance(row: dict[str, Any], metric: str, record: Any, answer: str, hit: bool) -> dict[str, Any]:
    return {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": evaluation_id(row),
        "model_id": row["architecture"],
        "evaluation_name": f"{scored(row)} {row['variant']} {metric}",
        "evaluation_result_id": metric,
        "sample_id": record.image_id,
        "sample_hash": record.sha256 or None,
        "interaction_type": "single_turn",
        "input": {"raw": record.image_id, "reference": [str(label) for label in record.labels]},
        "output": {"raw": [answer]},
        "answer_attribution": [
            {
                "turn_idx": 0,
                "source": "output.raw",
                "extracted_value": answer,
                "extraction_method": "exact_match",
                "is_terminal": True,
            }
        ],
        "evaluation": {"score": float(hit), "is_correct": hit},
    }


def samples_path(row: dict[str, Any]) -> str:
    """The instance file's path, as Every Eval Ever's repository lays them out (``data/<benchmark>/<developer>/
    <model>/<uuid>_samples.jsonl``: here the scored dataset, the variant and the model), its UUID (version 4 in
    form) derived from the evaluation id so that an export is reproducible."""
    digest = bytearray(hashlib.sha256(evaluation_id(row).encode()).digest()[:16])
    name = uuid.UUID(bytes=bytes(digest), version=4)
    return f"data/{scored(row)}/{row['variant']}/{row['model']}/{name}_samples.jsonl"


def _source(row: dict[str, Any]) -> dict[str, Any]:
    """Where the scored dataset comes from: its Hugging Face dataset and revision where the study pins one."""
    repo, revision = hub_dataset(row)
    if revision is None:
        return {"dataset_name": scored(row), "source_type": "other"}
    return {
        "dataset_name": scored(row),
        "source_type": "hf_dataset",
        "hf_repo": repo,
        "samples_number": row["n_images"],
        "additional_details": {"revision": revision},
    }


def aggregate_record(
    row: dict[str, Any], seal: str, options: dict[str, Any], jsonl: str, text: str, rows: int
) -> dict[str, Any]:
    """The aggregate record of one result, naming its instance file ``jsonl`` (``text``, ``rows`` lines)."""
    source = _source(row)
    provenance = {
        "study": str(row["study"]),
        "seal_sha256": seal,
        "key_sha256": row["key_sha256"],
        "key": json.dumps(row["key"], sort_keys=True),
    }
    return {
        "schema_version": EEE_SCHEMA_VERSION,
        "evaluation_id": evaluation_id(row),
        "retrieved_timestamp": epoch(options["date"]),
        "source_metadata": {
            "source_name": "zoomeval",
            "source_type": "evaluation_run",
            "source_organization_name": "zoomeval",
            "evaluator_relationship": "third_party",
            "additional_details": provenance,
        },
        "eval_library": {
            "name": "zoomeval",
            "version": str(row["zoomeval"]),
            "additional_details": {"zoomeval_commit": str(row["zoomeval_commit"])},
        },
        "model_info": {
            "name": row["model"],
            "id": row["architecture"],
            "additional_details": {
                "deployment_type": "self_deployed",
                "model_availability": "unknown",
                "weights_sha256": str(row["weights_sha256"]),
            },
        },
        "evaluation_results": [_result(row, metric, source) for metric in ACCURACIES if row[metric] is not None],
        "detailed_evaluation_results": {
            "format": "jsonl",
            "file_path": jsonl,
            "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(text.encode()).hexdigest(),
            "total_rows": rows,
        },
    }


def _result(row: dict[str, Any], metric: str, source: dict[str, Any]) -> dict[str, Any]:
    return {
        "evaluation_result_id": metric,
        "evaluation_name": f"{scored(row)} {row['variant']} {metric}",
        "source_data": source,
        "metric_config": {
            "evaluation_description": METRICS[metric],
            "metric_id": metric,
            "metric_unit": "percent",
            "lower_is_better": False,
            "score_type": "continuous",
            "min_score": 0,
            "max_score": 100,
        },
        "score_details": {
            "score": row[metric],
            "uncertainty": {
                "confidence_interval": {
                    "lower": row[f"{metric}_lo"],
                    "upper": row[f"{metric}_hi"],
                    "confidence_level": 0.95,
                    "method": "Wilson score interval",
                },
                "num_samples": row["n_images"],
            },
        },
    }


def epoch(day: str) -> str:
    """Unix seconds (as text, Every Eval Ever's form) of an ISO date's midnight UTC."""
    moment = datetime.fromisoformat(day)
    return str(int((moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()))
