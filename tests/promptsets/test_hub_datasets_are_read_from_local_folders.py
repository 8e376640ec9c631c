"""Hub datasets are read with ``datasets`` from a local folder in either of its layouts (what the
tests can reach: no machine here reaches the Hub), one row at a time, staged by a child process under the
upload's memory ceiling for the upload's checks."""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal

import pytest

from promptsets.hub_import import HubSource, HubSourceError, allowed_folder, dataset_rows, stage_dataset
from tests.promptsets.conftest import write_hub_layout, write_saved_dataset

ROWS = [{"statement_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 0 = {i} := by",
         "natural_language": f"Problem {i}", "rl_data": {"win_rate": i / 10}} for i in range(5)]


@pytest.fixture
def hub_layout(tmp_path):
    """A dataset repository as the Hub lays it out: Parquet shards under data/, split by file name."""
    return write_hub_layout(tmp_path / "Kimina-Prover-Promptset", {"train": [ROWS[:3], ROWS[3:]], "test": [ROWS[:1]]})


def test_a_hub_layout_folder_is_read_split_by_split(hub_layout):
    assert [row["statement_id"] for row in dataset_rows(HubSource(path=str(hub_layout)))] == [r["statement_id"] for r in ROWS]
    assert [row["statement_id"] for row in dataset_rows(HubSource(path=str(hub_layout), split="test"))] == ["p0"]


def test_a_save_to_disk_folder_is_read(tmp_path):
    write_saved_dataset(tmp_path / "saved", ROWS)
    rows = list(dataset_rows(HubSource(path=str(tmp_path / "saved"))))
    assert rows[4]["rl_data"] == {"win_rate": 0.4}
    with pytest.raises(HubSourceError, match="no split 'validation'; it has train"):
        list(dataset_rows(HubSource(path=str(tmp_path / "saved"), split="validation")))


def test_rows_are_the_rows_datasets_gives_whatever_the_column_types(tmp_path):
    """Rows are made by Arrow, a batch at once; they must be what datasets itself yields, row by row."""
    import datasets

    rows = [
        {"text": 'ü "quoted"\n', "count": 3, "share": 0.25, "flag": True, "tags": ["a", "b"],
         "rl_data": {"win_rate": 0.5, "notes": [{"k": 1}]}, "when": datetime(2024, 5, 1, 12, 30),
         "day": date(2024, 5, 1), "price": Decimal("1.25"), "raw": b"\x00\xff"},
        {"text": None, "count": None, "share": None, "flag": None, "tags": [], "rl_data": None, "when": None,
         "day": None, "price": None, "raw": None},
    ]
    saved = write_saved_dataset(tmp_path / "saved", rows)
    expected = list(datasets.load_from_disk(str(saved))["train"])
    assert list(dataset_rows(HubSource(path=str(saved)))) == expected
    hub = write_hub_layout(tmp_path / "hub", {"train": [rows]})
    assert list(dataset_rows(HubSource(path=str(hub)))) == expected


def test_staging_writes_json_lines_the_upload_checks_read(hub_layout, tmp_path):
    from promptsets.intake import check_file

    seen = []
    staged = tmp_path / "staged.jsonl"
    assert stage_dataset(HubSource(path=str(hub_layout)), staged, on_progress=seen.append) == 5
    assert seen[-1] == 5 and not staged.with_name("staged.jsonl.partial").exists()
    report = check_file(staged.open("rb"), filename="staged.jsonl")
    assert report.rows_accepted == 5 and report.columns["win_rate"] == "rl_data.win_rate"


def test_a_parquet_shard_is_read_one_row_group_at_a_time(tmp_path):
    """Arrow decodes a shard ahead of a reader slower than itself (the child writing JSON is): unless each
    row group is read on its own, memory holds the whole shard, not the row group the reader is at."""
    import time

    import pyarrow as pa

    row_group_rows, row_groups = 100, 40
    rows = [{**ROWS[0], "statement_id": f"p{i}", "natural_language": f"{i} " + "x" * 5000}
            for i in range(row_group_rows * row_groups)]
    folder = write_hub_layout(tmp_path / "long", {"train": [rows]}, row_group_rows=row_group_rows)
    one_row_group = row_group_rows * 5000
    before, most = pa.total_allocated_bytes(), 0
    for count, _ in enumerate(dataset_rows(HubSource(path=str(folder)), batch_rows=row_group_rows), start=1):
        most = max(most, pa.total_allocated_bytes() - before)
        if count % row_group_rows == 0:
            time.sleep(0.01)  # the time the child takes to write a row group's JSON, give or take
    # The row group being read, and on a busy machine the last two while Arrow's threads let go of
    # them (read as one scan, the shard ran 34 to 38 row groups ahead).
    assert count == len(rows) and one_row_group <= most < 5 * one_row_group


def test_a_missing_dataset_says_what_to_check(tmp_path):
    with pytest.raises(HubSourceError, match="nowhere"):
        list(dataset_rows(HubSource(path=str(tmp_path / "nowhere"))))
    with pytest.raises(HubSourceError, match="not both"):
        HubSource(name="AI-MO/NuminaMath-LEAN", path=str(tmp_path))


def test_a_hub_name_is_read_from_the_hub_even_where_a_server_folder_bears_that_path(hub_layout, tmp_path, monkeypatch):
    (tmp_path / "AI-MO").mkdir()
    hub_layout.rename(tmp_path / "AI-MO" / "Kimina-Prover-Promptset")
    monkeypatch.chdir(tmp_path)  # the worker's working directory now holds AI-MO/Kimina-Prover-Promptset
    with pytest.raises(HubSourceError, match="Couldn't reach 'AI-MO/Kimina-Prover-Promptset' on the Hub"):
        list(dataset_rows(HubSource(name="AI-MO/Kimina-Prover-Promptset")))


@pytest.mark.parametrize("name, says", [
    ("gpt2", "give it as owner/name"), ("../etc/passwd", "is not a dataset name"),
    ("AI-MO/Kimina/extra", "is not a dataset name"), ("AI-MO/a..b", "Cannot have -- or .."),
])
def test_a_dataset_name_must_be_owner_slash_name(name, says):
    with pytest.raises(HubSourceError, match=re.escape(says)):
        HubSource(name=name)


@pytest.mark.parametrize("field, value", [("split", "train[:10]"), ("config", "a b"), ("revision", "main/../x")])
def test_split_config_and_revision_are_refused_when_they_cannot_be_names(field, value):
    with pytest.raises(HubSourceError, match=f"{field} '"):
        HubSource(name="AI-MO/NuminaMath-LEAN", **{field: value})


def test_a_folder_is_allowed_only_under_the_roots_once_resolved(hub_layout, tmp_path):
    root = hub_layout.parent
    assert allowed_folder(str(hub_layout), [root]) == hub_layout.resolve()
    with pytest.raises(HubSourceError, match="PROMPTSET_IMPORT_ROOTS setting, which is empty"):
        allowed_folder(str(hub_layout), [])
    with pytest.raises(HubSourceError, match="not under a folder the server may read"):
        allowed_folder(str(hub_layout / ".." / ".."), [root])
    with pytest.raises(HubSourceError, match="absolute path"):
        allowed_folder("Kimina-Prover-Promptset", [root])
    (root / "escape").symlink_to("/etc", target_is_directory=True)
    with pytest.raises(HubSourceError, match="not under a folder the server may read"):
        allowed_folder(str(root / "escape"), [root])


def test_a_link_inside_an_allowed_folder_may_not_lead_outside_the_roots(hub_layout, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.parquet").write_bytes(b"not yours")
    (hub_layout / "data" / "validation-00000-of-00001.parquet").symlink_to(outside / "secret.parquet")
    with pytest.raises(HubSourceError, match="validation-00000-of-00001.parquet leads outside"):
        allowed_folder(str(hub_layout), [hub_layout])


def cut_short(shard):
    shard.write_bytes(shard.read_bytes()[:-40])


def damage_the_first_page(shard):
    damaged = bytearray(shard.read_bytes())
    damaged[4:24] = b"\xff" * 20  # the page header past the magic bytes: the footer still reads
    shard.write_bytes(bytes(damaged))


@pytest.mark.parametrize("damage, says, rows_written_before", [
    (cut_short, "Parquet magic bytes not found", []),  # every shard's footer is read before the first row
    (damage_the_first_page, "Deserializing page header failed", [1, 2, 3]),  # the first shard is written first
])
def test_staging_that_breaks_off_leaves_no_file(hub_layout, tmp_path, damage, says, rows_written_before):
    damage(hub_layout / "data" / "train-00001-of-00002.parquet")
    staged = tmp_path / "staging" / "staged.jsonl"
    staged.parent.mkdir()
    written = []
    with pytest.raises(HubSourceError, match=says):
        stage_dataset(HubSource(path=str(hub_layout)), staged, on_progress=written.append, batch_rows=1)
    assert written == rows_written_before
    assert list(staged.parent.iterdir()) == []


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
