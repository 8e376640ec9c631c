"""Hub datasets are read with ``datasets`` from a local folder in either of its layouts (what the
tests can reach: no machine here reaches the Hub), one row at a time, staged by a child process under the
upload's memory ceiling for the upload's checks."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from promptsets.hub_import import HubSource, HubSourceError, dataset_rows, stage_dataset

ROWS = [{"statement_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 0 = {i} := by",
         "natural_language": f"Problem {i}", "rl_data": {"win_rate": i / 10}} for i in range(5)]


@pytest.fixture
def hub_layout(tmp_path):
    """A dataset repository as the Hub lays it out: Parquet shards under data/, split by file name."""
    folder = tmp_path / "Kimina-Prover-Promptset"
    (folder / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(ROWS[:3]), folder / "data" / "train-00000-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS[3:]), folder / "data" / "train-00001-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS[:1]), folder / "data" / "test-00000-of-00001.parquet")
    return folder


def test_a_hub_layout_folder_is_read_split_by_split(hub_layout):
    assert [row["statement_id"] for row in dataset_rows(HubSource(path=str(hub_layout)))] == [r["statement_id"] for r in ROWS]
    assert [row["statement_id"] for row in dataset_rows(HubSource(path=str(hub_layout), split="test"))] == ["p0"]


def test_a_save_to_disk_folder_is_read(tmp_path):
    import datasets

    datasets.DatasetDict({"train": datasets.Dataset.from_list(ROWS)}).save_to_disk(tmp_path / "saved")
    rows = list(dataset_rows(HubSource(path=str(tmp_path / "saved"))))
    assert rows[4]["rl_data"] == {"win_rate": 0.4}
    with pytest.raises(HubSourceError, match="no split 'validation'; it has train"):
        list(dataset_rows(HubSource(path=str(tmp_path / "saved"), split="validation")))


def test_staging_writes_json_lines_the_upload_checks_read(hub_layout, tmp_path):
    from promptsets.intake import check_file

    seen = []
    staged = tmp_path / "staged.jsonl"
    assert stage_dataset(HubSource(path=str(hub_layout)), staged, on_progress=seen.append) == 5
    assert seen[-1] == 5 and not staged.with_name("staged.jsonl.partial").exists()
    report = check_file(staged.open("rb"), filename="staged.jsonl")
    assert report.rows_accepted == 5 and report.columns["win_rate"] == "rl_data.win_rate"


def test_a_missing_dataset_says_what_to_check(tmp_path):
    with pytest.raises(HubSourceError, match="nowhere"):
        list(dataset_rows(HubSource(path=str(tmp_path / "nowhere"))))
    with pytest.raises(HubSourceError, match="not both"):
        HubSource(name="AI-MO/NuminaMath-LEAN", path=str(tmp_path))


def test_reading_a_hub_dataset_does_not_import_torch(hub_layout, tmp_path):
    """torch is installed for the trainer; the worker reading a promptset must not pay its ~190 MB."""
    import subprocess
    import sys

    from promptsets.isolated_check import PLATFORM_DIR, REPO_DIR

    script = ("import sys; from promptsets.hub_import import HubSource, dataset_rows; "
              f"rows = list(dataset_rows(HubSource(path={str(hub_layout)!r}))); "
              "print(len(rows), 'torch' in sys.modules)")
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                               env={"PYTHONPATH": f"{PLATFORM_DIR}:{REPO_DIR}", "PATH": "/usr/bin:/bin",
                                    "HF_DATASETS_OFFLINE": "1", "HOME": str(tmp_path)})
    assert completed.stdout.split() == ["5", "False"]


def test_staging_reads_in_a_child_process_that_the_memory_ceiling_bounds(hub_layout, tmp_path):
    staged = tmp_path / "staged.jsonl"
    with pytest.raises(HubSourceError, match="needed more than 200 MB of memory, the limit per upload"):
        stage_dataset(HubSource(path=str(hub_layout)), staged, memory_ceiling_bytes=200 * 2**20)
    assert list(tmp_path.glob("staged.jsonl*")) == []


def test_staging_leaves_nothing_behind_when_the_source_cannot_be_read(hub_layout, tmp_path):
    with pytest.raises(HubSourceError, match="Bad split: validation"):
        stage_dataset(HubSource(path=str(hub_layout), split="validation"), tmp_path / "staged.jsonl")
    assert list(tmp_path.glob("staged.jsonl*")) == []
