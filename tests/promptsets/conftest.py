"""Fixtures of the promptset tests: small generated files in every format, and miniF2F when present."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
SHARED_DATA_DIR = REPO_DIR.parent / "shared" / "data"
MINIF2F_GOEDEL = SHARED_DATA_DIR / "minif2f_test.goedel.jsonl"
MINIF2F_DEEPSEEK = SHARED_DATA_DIR / "minif2f_valid_test.deepseek.jsonl"
PUTNAMBENCH = SHARED_DATA_DIR / "putnambench.lean4.jsonl"
PROOFNET = SHARED_DATA_DIR / "proofnet.lean4.jsonl"

KIMINA_HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"


def kimina_rows(count: int = 5) -> list[dict]:
    """Rows in the Kimina-Prover-Promptset layout (header inside formal_statement, nested rl_data)."""
    return [
        {
            "statement_id": f"kimina-{index}",
            "formal_statement": f"{KIMINA_HEADER}theorem sum_{index} (n : ℕ) (h : n = {index}) : n + 1 = {index + 1} := by\n  sorry",
            "natural_language": f"Show that if n = {index} then n + 1 = {index + 1}.",
            "source": "synthetic",
            "rl_data": {"win_rate": round(index / max(1, count - 1), 3)},
        }
        for index in range(count)
    ]


def write_hub_layout(folder: Path, splits: dict[str, list[list[dict]]], row_group_rows: int | None = None) -> Path:
    """``folder`` as a Hub dataset repository lays a dataset out: each split's shards (lists of rows) as
    Parquet files under data/, named ``<split>-0000i-of-0000n.parquet``, in row groups of ``row_group_rows`` rows
    (pyarrow's default otherwise: one per shard of up to a million rows)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    (folder / "data").mkdir(parents=True)
    for split, shards in splits.items():
        for index, rows in enumerate(shards):
            pq.write_table(pa.Table.from_pylist(rows), folder / "data" / f"{split}-{index:05d}-of-{len(shards):05d}.parquet",
                           row_group_size=row_group_rows)
    return folder


def write_saved_dataset(folder: Path, rows: list[dict]) -> Path:
    """``folder`` as ``datasets``' ``DatasetDict.save_to_disk`` writes one split, train, of ``rows``."""
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(folder)
    return folder


def encode(rows: list[dict], file_format: str) -> bytes:
    """``rows`` written as a file of ``file_format``; nested fields are flattened with dots for CSV."""
    if file_format == "jsonl":
        return "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows).encode()
    if file_format == "json":
        return json.dumps(rows, ensure_ascii=False, indent=1).encode()
    if file_format == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        buffer = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buffer, row_group_size=2)
        return buffer.getvalue()
    if file_format == "csv":
        flat = []
        for row in rows:
            flat_row = {}
            for key, value in row.items():
                if isinstance(value, dict):
                    flat_row.update({f"{key}.{inner}": inner_value for inner, inner_value in value.items()})
                else:
                    flat_row[key] = value
            flat.append(flat_row)
        text = io.StringIO()
        writer = csv.DictWriter(text, fieldnames=list(flat[0]))
        writer.writeheader()
        writer.writerows(flat)
        return text.getvalue().encode()
    raise ValueError(file_format)


def _shared_data(path):
    """A file of ../shared/data; the test is skipped where the checkout has no shared/ beside it."""
    if not path.exists():
        pytest.skip(f"{path} is absent (the repository carries no data)")
    return path


@pytest.fixture
def minif2f_goedel_path():
    return _shared_data(MINIF2F_GOEDEL)


@pytest.fixture
def minif2f_deepseek_path():
    return _shared_data(MINIF2F_DEEPSEEK)


@pytest.fixture
def checked_at_once(monkeypatch, django_capture_on_commit_callbacks):
    """Uploads checked as soon as they are committed, by the task's own function (the Celery worker itself
    runs in tests/security/test_upload_bombs_cannot_hurt_the_web_process.py). Use: ``with checked_at_once(): …``."""
    from promptsets import uploads

    monkeypatch.setattr("promptsets.uploads._enqueue_check", uploads.run_upload)
    return lambda: django_capture_on_commit_callbacks(execute=True)


@pytest.fixture
def putnambench_path():
    return _shared_data(PUTNAMBENCH)


@pytest.fixture
def proofnet_path():
    return _shared_data(PROOFNET)
