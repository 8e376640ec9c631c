"""The child that reads an upload runs under RLIMIT_AS: past the ceiling it ends with the file's error,
never taking its parent (the Celery worker, or the web process's dry run) with it."""

import json

from promptsets.intake import RowLimits
from promptsets.isolated_check import IsolatedFileCheck
from promptsets.parsing import FileFormatError, precheck

MB = 1024 * 1024


def dictionary_bomb(path, statement_bytes: int, rows: int = 2000):
    """Parquet rows that all point at one dictionary string: stored once, decoded once per row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    statement = "theorem t : 1 = 1 := by -- " + "a" * statement_bytes
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), pa.array([statement]))
    pq.write_table(pa.table({"formal_statement": column}), path, compression="zstd")
    return path


def test_a_file_that_needs_more_than_the_ceiling_is_refused_with_the_ceiling_named(tmp_path):
    # 1.2 KB on disk and within the footer's sizes (the 20 MB string is stored once), 40 GB decoded:
    # the first batch of rows passes the 1 GiB ceiling, and the child, not its parent, fails.
    path = dictionary_bomb(tmp_path / "bomb.parquet", 20 * MB)
    assert path.stat().st_size < 2048
    check = IsolatedFileCheck(path, filename="bomb.parquet")
    assert list(check.candidates()) == []
    assert check.report.file_error.startswith("reading it needed more than 1,024 MB of memory, the limit per upload")
    check.close()


def test_under_the_ceiling_the_child_returns_every_candidate_and_its_peak_memory(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"formal_statement": f"theorem t{i} : {i} + 1 = {i + 1} := by"}) + "\n"
                            for i in range(3)))
    progress = []
    check = IsolatedFileCheck(path, filename="rows.jsonl", on_progress=lambda *seen: progress.append(seen))
    assert [c.problem_key for c in check.candidates()] == ["t0", "t1", "t2"]
    assert check.report.rows_accepted == 3 and progress[-1] == (3, path.stat().st_size, path.stat().st_size)
    assert 10 * MB < check.peak_memory_bytes < 300 * MB
    check.close()


def test_the_web_process_precheck_reads_only_the_parquet_footer(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "wide.parquet"
    pq.write_table(pa.table({"formal_statement": ["a" * (2 * MB)]}), path, compression="zstd")
    with path.open("rb") as file:
        try:
            precheck(file, filename="wide.parquet", max_row_bytes=RowLimits().max_row_bytes)
        except FileFormatError as error:
            assert "over the limit of 1,048,576 bytes per row" in str(error)
        else:
            raise AssertionError("a 2 MB row passed the footer check")


def test_a_586_byte_parquet_dictionary_bomb_is_read_in_small_batches_under_the_default_ceiling(tmp_path):
    """2,000 rows pointing at one 900 KB dictionary string pass the footer check (the string is stored
    once); decoded they are 1.8 GB. Read 64 rows at a time, the child stays far under its ceiling."""
    path = dictionary_bomb(tmp_path / "dictionary.parquet", 900 * 1024)
    check = IsolatedFileCheck(path, filename="dictionary.parquet")
    assert list(check.candidates()) == []
    assert check.report.rows_read == 2000 and check.report.file_error is None
    assert "is 921,627 characters long; the limit is 100,000" in check.report.rejections[0].reason
    assert check.peak_memory_bytes < 300 * MB
    check.close()
