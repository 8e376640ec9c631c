"""Checking an uploaded file in a child process with a memory ceiling, so a hostile file cannot hurt
the process that asked (the Celery worker; the web process never reads an uploaded file's rows).

The child (``python -m promptsets.isolated_check``) runs ``FileCheck`` (pure Python and pyarrow, no
Django) with ``RLIMIT_AS`` set before it starts: a file that would need more memory than the
ceiling ends the child with a MemoryError, reported as the file's error, never a crash of the
parent. It writes each accepted candidate as a JSON line to a file and its progress and final
report as JSON lines on stdout; the parent streams the candidates back into the database.
Attacks (a 9 KB Parquet with one 256 MB row, a CSV with one 200 MB line) are in tests/security/.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path

from promptsets.intake import (
    CandidateProblem, CheckWorkerDied, ColumnMapping, FileCheck, IntakeReport, RowLimits, RowRejection,
)

PLATFORM_DIR = Path(__file__).resolve().parent.parent
REPO_DIR = PLATFORM_DIR.parent
PROGRESS_EVERY_ROWS = 500
DEFAULT_MEMORY_CEILING_MB = 1024
DEFAULT_MAX_CHECK_WORKERS = 8
# Below this size a file is checked sooner by one process than worker processes start.
PARALLEL_CHECK_MIN_BYTES = 2 * 2**20


def default_memory_ceiling_bytes() -> int:
    """The address space a child that reads an upload (or a Hub dataset) may use."""
    return int(os.environ.get("PROMPTSET_PARSE_MEMORY_MB", DEFAULT_MEMORY_CEILING_MB)) * 1024 * 1024


def check_workers(file_bytes: int) -> int:
    """How many processes check the rows of a file of ``file_bytes``: one per CPU this process may use, at
    most PROMPTSET_CHECK_WORKERS (8 by default); one for a small file."""
    if file_bytes < PARALLEL_CHECK_MIN_BYTES:
        return 1
    allowed = int(os.environ.get("PROMPTSET_CHECK_WORKERS", DEFAULT_MAX_CHECK_WORKERS))
    return max(1, min(len(os.sched_getaffinity(0)), allowed))


def child_environment() -> dict[str, str]:
    """The environment of such a child: this checkout's modules first, and Arrow on the system allocator
    (pyarrow's own reserves address space up front, and keeps freed memory)."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(PLATFORM_DIR), str(REPO_DIR)]),
            "ARROW_DEFAULT_MEMORY_POOL": "system"}


def start_child(module: str, *arguments: str) -> subprocess.Popen:
    """``python -m module arguments…`` with this checkout's modules, its stdout and stderr piped as text.

    The child sets its own memory ceiling first thing (``limit_memory``), not a preexec_fn: that
    would fork a copy of a large parent.
    """
    return subprocess.Popen([sys.executable, "-m", module, *arguments], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=child_environment())


def limit_memory(ceiling_bytes: int) -> None:
    """The child's first act: its address space may not grow past ``ceiling_bytes``."""
    resource.setrlimit(resource.RLIMIT_AS, (ceiling_bytes, ceiling_bytes))


def ran_out_of_memory(errors: str, returncode: int) -> bool:
    """Whether a child under the ceiling ended for want of memory: Python's MemoryError, the C library's
    ENOMEM, a shared library it could not map (an import under the ceiling), or the kernel's kill."""
    out_of_memory = ("MemoryError", "Cannot allocate memory", "failed to map segment")
    return any(words in errors for words in out_of_memory) or returncode in (-9, 137)


def say(message: dict) -> None:
    """A child's report to its parent: one JSON line on stdout, at once."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class IsolatedFileCheck:
    """``FileCheck``'s interface (``candidates()`` and ``report``) for a file on disk, checked in a child.

    ``run()`` lets the child read the whole file (``on_progress(rows_read, bytes_read, bytes_total)``
    follows it; ``candidates()`` runs it if not yet done), then ``candidates()`` yields what it accepted;
    ``report`` (the same object throughout) is complete from the first candidate on, as the importer's
    all-or-nothing rule needs.
    """

    def __init__(self, path: str | Path, *, filename: str = "", file_format: str | None = None,
                 mapping: ColumnMapping | None = None, limits: RowLimits | None = None, default_header: str = "",
                 on_progress: Callable[[int, int, int], None] | None = None, memory_ceiling_bytes: int | None = None):
        self.path = Path(path)
        self.options = {"filename": filename, "file_format": file_format,
                        "mapping": asdict(mapping or ColumnMapping()), "limits": asdict(limits or RowLimits()),
                        "default_header": default_header}
        self.filename = filename
        self.on_progress = on_progress
        self.memory_ceiling_bytes = memory_ceiling_bytes or default_memory_ceiling_bytes()
        self.report = IntakeReport(filename=filename)
        self.peak_memory_bytes: int | None = None
        self._folder: tempfile.TemporaryDirectory | None = None

    def run(self) -> None:
        """Let the child read the whole file (once); its accepted rows wait in a temporary file."""
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="promptset-check-")
            self._run_child(Path(self._folder.name) / "candidates.jsonl")

    def candidates(self) -> Iterator[CandidateProblem]:
        self.run()
        out = Path(self._folder.name) / "candidates.jsonl"
        if self.report.file_error or not out.exists():
            return
        with out.open(encoding="utf-8") as lines:
            for line in lines:
                yield CandidateProblem(**json.loads(line))

    def close(self) -> None:
        if self._folder is not None:
            self._folder.cleanup()

    def _run_child(self, out: Path) -> None:
        ceiling = self.memory_ceiling_bytes
        child = start_child("promptsets.isolated_check", str(self.path), str(out), json.dumps(self.options), str(ceiling))
        final = None
        for line in child.stdout:
            message = json.loads(line)
            if "report" in message:
                final = message["report"]
                self.peak_memory_bytes = message.get("peak_memory_bytes")
            elif self.on_progress is not None:
                self.on_progress(message["rows_read"], message["bytes_read"], message["bytes_total"])
        errors = child.stderr.read()
        child.wait()
        if final is not None:
            # Filled in place: whoever already holds ``report`` (the importer does) sees the child's findings.
            vars(self.report).update(vars(_report_from(final)))
            return
        ceiling_mb = ceiling // (1024 * 1024)
        if ran_out_of_memory(errors, child.returncode):
            self.report.file_error = (f"reading it needed more than {ceiling_mb:,} MB of memory, the limit per upload: "
                                      "split the file, or write it with shorter rows (or smaller Parquet row groups)")
        else:
            last = errors.strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
            self.report.file_error = f"the file could not be checked ({last[0][:300]})"


def _report_from(data: dict) -> IntakeReport:
    rejections = [RowRejection(**rejection) for rejection in data.pop("rejections")]
    return IntakeReport(**data, rejections=rejections)


def _peak_memory_bytes() -> int | None:
    """This process image's own high-water mark (VmHWM), not counting what it was before exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _child(path: str, out: str, options_json: str, ceiling: str) -> int:
    limit_memory(int(ceiling))
    options = json.loads(options_json)
    total = os.path.getsize(path)
    with open(path, "rb") as file, open(out, "w", encoding="utf-8") as candidates:
        check = FileCheck(file, filename=options["filename"], file_format=options["file_format"],
                          mapping=ColumnMapping(**options["mapping"]), limits=RowLimits(**options["limits"]),
                          default_header=options["default_header"], workers=check_workers(total))
        said_at = 0
        try:
            for candidate in check.candidates():
                # vars(), not asdict(): the fields are flat, and asdict's deep copy cost as much as reading the row.
                candidates.write(json.dumps(vars(candidate), ensure_ascii=False) + "\n")
                if check.report.rows_read >= said_at + PROGRESS_EVERY_ROWS:
                    said_at = check.report.rows_read
                    say({"rows_read": said_at, "bytes_read": _position(file), "bytes_total": total})
        except CheckWorkerDied as error:
            # The last line of stderr is what the parent shows.
            print(f"{error}: it was killed, perhaps for want of memory; try again, or split the file", file=sys.stderr)
            return 1
        report = check.report
        say({"rows_read": report.rows_read, "bytes_read": total, "bytes_total": total})
    say({"report": {"filename": report.filename, "file_format": report.file_format, "columns": report.columns,
                     "rows_read": report.rows_read, "rows_accepted": report.rows_accepted,
                     "file_error": report.file_error, "rejections": [asdict(r) for r in report.rejections]},
          "peak_memory_bytes": _peak_memory_bytes()})
    return 0


def _position(file) -> int:
    try:
        return file.tell()
    except (OSError, ValueError):  # a text layer over it may forbid tell(); progress is a courtesy
        return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:5]))
