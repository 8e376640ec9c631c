"""A large file's rows are checked by several processes; what they find is what one process finds, in the
file's order, and a checking process that dies ends the check with a message, never a hang."""

from __future__ import annotations

import io
import os
import signal
import threading
import time

import psutil
import pytest

from promptsets import intake
from promptsets.intake import CheckWorkerDied, FileCheck
from promptsets.isolated_check import PARALLEL_CHECK_MIN_BYTES, IsolatedFileCheck, check_workers
from tests.promptsets.conftest import KIMINA_HEADER, encode, kimina_rows


def rows_of_every_kind(count: int) -> list[dict]:
    """Accepted rows, and among them every way a row is turned away or renamed, spread over many batches
    (a row over the size limit is a read error in a text file; in Parquet, the whole file's)."""
    rows = kimina_rows(count)
    for index in range(0, count, 11):
        rows[index]["formal_statement"] = f"theorem proved_{index} : 1 = 1 := by simp"  # a proof: rejected
    for index in range(3, count, 13):
        # The same statement as the row before, laid out differently: a duplicate.
        rows[index]["formal_statement"] = rows[index - 1]["formal_statement"].replace(" : ", "  :\n  ", 1)
    for index in range(5, count, 17):
        rows[index]["formal_statement"] = f"{KIMINA_HEADER}#eval 1\ntheorem t : True := by"
    for index in range(7, count, 19):
        rows[index]["statement_id"] = rows[index - 2]["statement_id"]  # an id used twice
    for index in range(9, count, 23):
        rows[index]["natural_language"] = "x" * 2000  # over the row limit below: a read error
    for index in range(4, count, 29):
        rows[index]["formal_statement"] = rows[index]["formal_statement"].replace(f"theorem sum_{index} ", "theorem reused ")
    return rows


def without_ids(rows: list[dict]) -> list[dict]:
    """Ids from theorem names, which repeat: the later rows are renamed, not rejected."""
    return [{key: value for key, value in row.items() if key != "statement_id"} for row in rows]


def checked(data: bytes, filename: str, workers: int):
    check = FileCheck(io.BytesIO(data), filename=filename, workers=workers,
                      limits=intake.RowLimits(max_row_bytes=1000))
    candidates = [vars(candidate) for candidate in check.candidates()]
    return candidates, check.report.as_dict()


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
@pytest.mark.parametrize(("make_rows", "outcomes"), [
    (rows_of_every_kind, ["a proof follows", "runs code", "duplicate of row", "already used by row", "the limit is"]),
    (lambda count: without_ids(rows_of_every_kind(count)), ["a proof follows", "duplicate of row", "renamed"]),
], ids=["with ids", "ids from theorem names"])
def test_three_processes_find_the_same_candidates_and_report_as_one(file_format, make_rows, outcomes, monkeypatch):
    monkeypatch.setattr(intake, "CHECK_BATCH_ROWS", 7)  # many batches, many in flight at once
    rows = make_rows(300)
    if file_format == "parquet":
        rows = [row for row in rows if len(row.get("natural_language", "")) < 1000]
        outcomes = [outcome for outcome in outcomes if outcome != "the limit is"]
    data = encode(rows, file_format)
    one = checked(data, f"rows.{file_format}", workers=1)
    three = checked(data, f"rows.{file_format}", workers=3)
    assert three == one
    candidates, report = one
    assert report["rows_read"] == len(rows) and len(candidates) == report["rows_accepted"] > 200
    found = {outcome for outcome in outcomes if any(outcome in rejection["reason"] for rejection in report["rejections"])}
    if any("~row-" in candidate["problem_key"] for candidate in candidates):
        found.add("renamed")
    assert found == set(outcomes)


def test_a_file_that_breaks_off_reports_the_rows_before_the_break_as_one_process_does(monkeypatch):
    monkeypatch.setattr(intake, "CHECK_BATCH_ROWS", 7)
    whole = encode(kimina_rows(120), "json")
    broken = whole[: len(whole) * 2 // 3]  # a JSON array cut in the middle of a row
    one = checked(broken, "rows.json", workers=1)
    assert one[1]["file_error"] and one[1]["rows_read"] > 50
    assert checked(broken, "rows.json", workers=3) == one


def test_a_checking_process_killed_mid_file_ends_the_check_with_an_error_not_a_hang(monkeypatch):
    monkeypatch.setattr(intake, "CHECK_BATCH_ROWS", 50)
    check = FileCheck(io.BytesIO(encode(kimina_rows(20_000), "jsonl")), filename="rows.jsonl", workers=2)
    candidates = check.candidates()
    next(candidates)
    this_process = psutil.Process()
    workers = [child for child in this_process.children() if child.cmdline() == this_process.cmdline()]  # forked
    assert len(workers) == 2
    os.kill(workers[0].pid, signal.SIGKILL)
    outcome: list = []

    def read_the_rest() -> None:
        try:
            outcome.append(sum(1 for _ in candidates))
        except CheckWorkerDied as error:
            outcome.append(error)

    reader = threading.Thread(target=read_the_rest, daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert not reader.is_alive(), "the check hung after a worker died"
    assert isinstance(outcome[0], CheckWorkerDied) and "exit status -9" in str(outcome[0])


def test_an_upload_whose_checking_process_is_killed_says_so(tmp_path):
    rows = kimina_rows(6_000)
    path = tmp_path / "big.jsonl"
    path.write_bytes(encode(rows, "jsonl"))
    assert path.stat().st_size >= PARALLEL_CHECK_MIN_BYTES and check_workers(path.stat().st_size) >= 2
    killed: list[int] = []

    def kill_a_worker(rows_read: int, bytes_read: int, bytes_total: int) -> None:
        if killed:
            return
        child = next(process for process in psutil.Process(os.getpid()).children()
                     if "promptsets.isolated_check" in " ".join(process.cmdline()))
        workers = child.children()
        if workers:
            workers[0].kill()
            killed.append(workers[0].pid)

    check = IsolatedFileCheck(path, filename="big.jsonl", on_progress=kill_a_worker)
    check.run()
    check.close()
    assert killed, "the check never reported progress while its workers ran"
    assert check.report.file_error == ("the file could not be checked (a process checking the rows ended (exit status -9): "
                                       "it was killed, perhaps for want of memory; try again, or split the file)")


def test_a_small_file_is_checked_by_one_process_and_a_large_one_by_every_cpu_allowed(monkeypatch):
    assert check_workers(PARALLEL_CHECK_MIN_BYTES - 1) == 1
    assert check_workers(PARALLEL_CHECK_MIN_BYTES) == min(len(os.sched_getaffinity(0)), 8)
    monkeypatch.setenv("PROMPTSET_CHECK_WORKERS", "1")
    assert check_workers(10 * PARALLEL_CHECK_MIN_BYTES) == 1


def test_when_the_reading_process_is_killed_its_checking_processes_end_too(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(encode(kimina_rows(6_000), "jsonl"))
    workers: list[psutil.Process] = []

    def kill_the_reader(rows_read: int, bytes_read: int, bytes_total: int) -> None:
        if workers:
            return
        child = next(process for process in psutil.Process(os.getpid()).children()
                     if "promptsets.isolated_check" in " ".join(process.cmdline()))
        workers.extend(child.children())
        child.kill()

    check = IsolatedFileCheck(path, filename="big.jsonl", on_progress=kill_the_reader)
    # The upload must end even if its reader's workers did not (they would hold the reader's stdout open).
    runner = threading.Thread(target=check.run, daemon=True)
    runner.start()
    runner.join(timeout=60)
    assert not runner.is_alive(), "the upload's check never ended after its reader was killed"
    check.close()
    assert len(workers) >= 2 and "memory" in check.report.file_error  # a reader killed reads as out of memory
    assert all(has_ended(worker) for worker in workers), "checking processes outlived their reader"


def has_ended(process: psutil.Process, within_s: float = 30) -> bool:
    """Whether ``process`` exits within ``within_s`` (a zombie has exited: only its parent's wait is missing)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False
