"""From a file's rows to candidate problems: column mapping, per-row checks, duplicates.

Shared by the upload form, the API and the management commands, so every door applies the
same rules. Pure Python (no Django): ``check_rows`` streams, and keeps in memory only the
rejected rows and one fingerprint per accepted row (for duplicate detection).

Why one piece: every check a row meets between the file and the database, in the order it meets
them, so the doors (form, API, commands) cannot drift apart.
"""

from __future__ import annotations

import hashlib
import math
import multiprocessing
import queue
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields, replace
from operator import attrgetter
from typing import Any, BinaryIO, Protocol

from django.template.defaultfilters import pluralize

from promptsets.parsing import DEFAULT_MAX_ROW_BYTES, FileFormat, FileFormatError, RawRow, RowSource, open_rows
from promptsets.validation import (
    DEFAULT_MAX_STATEMENT_CHARS,
    StatementRejected,
    informal_from_doc_comment,
    validate_lean_statement,
)
from trainer.recipe.problems import DEFAULT_LEAN_HEADER

# The Kimina-Prover-RL recipe's preamble, given to rows whose statement brings none.
RECIPE_HEADER = DEFAULT_LEAN_HEADER  # the trainer's (trainer/recipe/problems.py), the one home of it
DEFAULT_MAX_FIELD_CHARS = 100_000
MAX_KEY_CHARS = 300

# Column names of the common sources, in order of preference: Kimina-Prover-Promptset and
# NuminaMath-LEAN (formal_statement, natural_language/problem, statement_id/uuid, source,
# rl_data.win_rate) and miniF2F (name, informal_prefix, formal_statement, header).
KNOWN_COLUMNS: dict[str, tuple[str, ...]] = {
    "formal_statement": ("formal_statement", "lean4_statement", "statement"),
    "informal_statement": ("natural_language", "problem", "informal_statement", "informal_prefix", "informal_problem"),
    "problem_key": ("statement_id", "uuid", "name", "problem_id", "id"),
    "name": ("name", "problem_name", "statement_id"),
    "header": ("header",),
    "source": ("source",),
    "win_rate": ("rl_data.win_rate", "win_rate"),
}
FIELD_LABELS = {
    "formal_statement": "Formal statement", "informal_statement": "Informal statement",
    "problem_key": "Problem id", "name": "Name", "header": "Header", "source": "Source", "win_rate": "Win rate",
}


@dataclass(frozen=True)
class ColumnMapping:
    """Which column feeds each field; ``None`` means: the first known name present in the file."""

    formal_statement: str | None = None
    informal_statement: str | None = None
    problem_key: str | None = None
    name: str | None = None
    header: str | None = None
    source: str | None = None
    win_rate: str | None = None

    def explicit(self) -> dict[str, str]:
        return {name: column for name, column in asdict(self).items() if column}


@dataclass(frozen=True)
class RowLimits:
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES
    max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS
    max_field_chars: int = DEFAULT_MAX_FIELD_CHARS


@dataclass(frozen=True)
class CandidateProblem:
    row: int
    problem_key: str
    name: str
    formal_statement: str
    informal_statement: str
    header: str
    source: str
    source_win_rate: float | None
    statement_hash: str

    def __reduce__(self):
        # Sent back by a check worker for every row: as its fields, at half the cost of a dataclass's state.
        return CandidateProblem, _candidate_fields(self)


_candidate_fields = attrgetter(*(candidate_field.name for candidate_field in fields(CandidateProblem)))


@dataclass(frozen=True)
class RowRejection:
    row: int
    line: int | None
    reason: str
    problem_key: str = ""

    def describe(self) -> str:
        where = f"row {self.row}" + (f" (line {self.line})" if self.line and self.line != self.row else "")
        key = f" [{self.problem_key}]" if self.problem_key else ""
        return f"{where}{key}: {self.reason}"


@dataclass
class IntakeReport:
    """What checking a file found; ``file_error`` is set when the file as a whole was unreadable."""

    filename: str = ""
    file_format: str = ""
    columns: dict[str, str] = field(default_factory=dict)  # field -> the column it was read from
    rows_read: int = 0
    rows_accepted: int = 0
    rejections: list[RowRejection] = field(default_factory=list)
    file_error: str | None = None

    @property
    def rows_rejected(self) -> int:
        return len(self.rejections)

    @property
    def is_clean(self) -> bool:
        return self.file_error is None and not self.rejections and self.rows_accepted > 0

    def summary(self) -> str:
        if self.file_error:
            return f"{self.filename or 'The file'} cannot be read: {self.file_error}"
        if not self.rows_read:
            return f"{self.filename or 'The file'} holds no rows."
        return (
            f"{self.rows_read:,} row{pluralize(self.rows_read)} read, {self.rows_accepted:,} valid, {self.rows_rejected:,} rejected"
            + (f" (format {self.file_format})" if self.file_format else "")
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "filename": self.filename, "file_format": self.file_format, "columns": self.columns,
            "rows_read": self.rows_read, "rows_accepted": self.rows_accepted, "rows_rejected": self.rows_rejected,
            "file_error": self.file_error, "summary": self.summary(),
            "rejections": [asdict(rejection) for rejection in self.rejections],
        }


def statement_fingerprint(formal_statement: str) -> str:
    """Identity of a statement regardless of whitespace layout (the same as models.statement_hash)."""
    return hashlib.sha256(" ".join(formal_statement.split()).encode()).hexdigest()


def _lookup(values: dict[str, Any], column: str) -> tuple[bool, Any]:
    """A value by column name; a dotted name also reaches into a nested object (rl_data.win_rate)."""
    if column in values:
        return True, values[column]
    head, _, rest = column.partition(".")
    if rest and isinstance(values.get(head), dict):
        return _lookup(values[head], rest)
    return False, None


def _has_column(columns: list[str], sample: dict[str, Any] | None, column: str) -> bool:
    if column in columns:
        return True
    head, _, rest = column.partition(".")
    if rest and head in columns:
        return sample is None or _lookup(sample, column)[0]
    return False


def resolve_columns(mapping: ColumnMapping, columns: list[str], sample: dict[str, Any] | None) -> dict[str, str]:
    """Field -> column; FileFormatError when a mapped column is absent or no formal statement is found."""
    resolved: dict[str, str] = {}
    for field_name, column in mapping.explicit().items():
        if not _has_column(columns, sample, column):
            raise FileFormatError(
                f"the column {column!r} chosen for {FIELD_LABELS[field_name]} is not in the file; "
                f"its columns are: {', '.join(columns) or '(none)'}"
            )
        resolved[field_name] = column
    for field_name, candidates in KNOWN_COLUMNS.items():
        if field_name in resolved:
            continue
        found = next((c for c in candidates if _has_column(columns, sample, c)), None)
        if found:
            resolved[field_name] = found
    if "formal_statement" not in resolved:
        raise FileFormatError(
            "no formal statement column: looked for "
            f"{', '.join(KNOWN_COLUMNS['formal_statement'])}; the file's columns are: {', '.join(columns) or '(none)'}. "
            "Choose the column in 'Formal statement column'"
        )
    return resolved


def _text(values: dict[str, Any], column: str | None, label: str, limit: int) -> str:
    if not column:
        return ""
    is_present, value = _lookup(values, column)
    if not is_present or value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise StatementRejected(
            f"{label} ({column!r}) must be text, got a {type(value).__name__}: {str(value)[:60]!r}"
        )
    text = str(value)
    if len(text) > limit:
        raise StatementRejected(f"{label} ({column!r}) is {len(text):,} characters long; the limit is {limit:,}")
    if "\x00" in text:
        raise StatementRejected(f"{label} ({column!r}) contains a NUL character: remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise StatementRejected(f"{label} ({column!r}) is not valid UTF-8: re-save the file as UTF-8") from None
    return text


def _win_rate(values: dict[str, Any], column: str | None) -> float | None:
    if not column:
        return None
    is_present, value = _lookup(values, column)
    if not is_present or value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        rate = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        rate = math.nan
    if not (0.0 <= rate <= 1.0):
        raise StatementRejected(f"the win rate ({column!r}) must be a number from 0 to 1, got {str(value)[:40]!r}")
    return rate


class RowCheck(Protocol):
    """What versions.import_promptset stores from: ``FileCheck`` in this process (the management commands, the
    demo), or ``isolated_check.IsolatedFileCheck`` in a child process (uploads). ``report`` is one object,
    complete once ``candidates()`` is exhausted; its ``filename`` names the file in messages."""

    report: IntakeReport

    def candidates(self) -> Iterator[CandidateProblem]: ...


# Rows checked per task: large enough that handing a batch to a worker costs little beside checking it,
# small enough that the batches in flight (two per worker) hold little memory, however long the rows
# (as the parser measured them: RawRow.size).
CHECK_BATCH_ROWS = 1000
CHECK_BATCH_SIZE = 4_000_000


@dataclass(frozen=True)
class RowRules:
    """How one row becomes a candidate problem: what checking it needs, and nothing else, so that a
    worker process can be handed it with each batch."""

    limits: RowLimits
    default_header: str

    def outcomes(self, rows: list[RawRow], columns: dict[str, str] | None) -> list[CandidateProblem | RowRejection]:
        """For each row, in order, its candidate or why it is rejected (duplicates are the reader's to find)."""
        outcomes: list[CandidateProblem | RowRejection] = []
        for raw in rows:
            if raw.read_error:
                outcomes.append(RowRejection(raw.number, raw.line, raw.read_error))
                continue
            try:
                outcomes.append(self.candidate(raw.number, raw.values, columns))
            except StatementRejected as error:
                outcomes.append(RowRejection(raw.number, raw.line, str(error), self._key_for_report(raw.values, columns)))
        return outcomes

    def _key_for_report(self, values: dict[str, Any], columns: dict[str, str]) -> str:
        column = columns.get("problem_key")
        is_present, value = _lookup(values, column) if column else (False, None)
        return str(value)[:MAX_KEY_CHARS] if is_present and isinstance(value, (str, int)) else ""

    def candidate(self, number: int, values: dict[str, Any], columns: dict[str, str]) -> CandidateProblem:
        limit = self.limits.max_field_chars
        is_present, _ = _lookup(values, columns["formal_statement"])
        if not is_present:
            raise StatementRejected(f"the row has no {columns['formal_statement']!r} field: add the formal statement")
        formal = _text(values, columns["formal_statement"], "the formal statement", limit)
        header = _text(values, columns.get("header"), "the header", limit)
        statement = validate_lean_statement(formal, header=header, max_chars=self.limits.max_statement_chars)
        if not statement.header and self.default_header.strip():
            statement = validate_lean_statement(
                statement.formal_statement, header=self.default_header, max_chars=self.limits.max_statement_chars,
            )
        key = _text(values, columns.get("problem_key"), "the problem id", limit).strip()
        if len(key) > MAX_KEY_CHARS:
            raise StatementRejected(f"the problem id is {len(key):,} characters long; the limit is {MAX_KEY_CHARS}")
        name = _text(values, columns.get("name"), "the name", limit).strip()[:MAX_KEY_CHARS]
        informal = _text(values, columns.get("informal_statement"), "the informal statement", limit)
        source = _text(values, columns.get("source"), "the source", limit).strip()[:200]
        return CandidateProblem(
            row=number,
            problem_key=key or statement.theorem_name or f"row-{number}",
            name=name or statement.theorem_name or key or f"row-{number}",
            formal_statement=statement.formal_statement,
            informal_statement=informal_from_doc_comment(informal),
            header=statement.header,
            source=source,
            source_win_rate=_win_rate(values, columns.get("win_rate")),
            statement_hash=statement_fingerprint(statement.formal_statement),
        )


class FileCheck:
    """Reads a file row by row; ``candidates()`` yields valid problems and fills ``report``.

    With ``workers`` above 1, rows are checked in batches by that many processes while this one reads
    the file and, in the file's order, finds duplicates and fills the report: the same candidates and
    report as one process gives. The workers are forked when ``candidates()`` starts, before the
    reader imports pyarrow, so each holds little more than the interpreter and the checks; forking
    is safe only in a process without threads, which is why only the upload check's own child
    (``isolated_check``) asks for workers.
    """

    def __init__(
        self, file: BinaryIO, *, filename: str = "", file_format: FileFormat | str | None = None,
        mapping: ColumnMapping | None = None, limits: RowLimits | None = None, default_header: str = RECIPE_HEADER,
        workers: int = 1,
    ):
        self.file = file
        self.filename = filename
        self.file_format = FileFormat(file_format) if file_format else None
        self.mapping = mapping or ColumnMapping()
        self.rules = RowRules(limits=limits or RowLimits(), default_header=default_header)
        self.workers = workers
        self.report = IntakeReport(filename=filename)

    def candidates(self) -> Iterator[CandidateProblem]:
        try:
            if self.rules.default_header.strip():
                validate_lean_statement("example : True := by", header=self.rules.default_header)
        except StatementRejected as error:
            self.report.file_error = f"the default header is not allowed: {error}"
            return
        with _batch_checker(self.rules, self.workers) as check_batches:
            yield from self._candidates(check_batches)

    def _candidates(self, check_batches) -> Iterator[CandidateProblem]:
        seen_statements: dict[str, int] = {}
        seen_keys: dict[str, int] = {}
        for rows, columns, outcomes in check_batches(self._batches()):
            for raw, outcome in zip(rows, outcomes):
                if isinstance(outcome, RowRejection):
                    self.report.rejections.append(outcome)
                    continue
                candidate = outcome
                if candidate.statement_hash in seen_statements:
                    self.report.rejections.append(RowRejection(
                        raw.number, raw.line,
                        f"duplicate of row {seen_statements[candidate.statement_hash]} (the same statement, "
                        "ignoring whitespace): remove one of them", candidate.problem_key,
                    ))
                    continue
                if candidate.problem_key in seen_keys and "problem_key" not in columns:
                    # Ids made from theorem names need not be unique (autoformalizers reuse `test`).
                    candidate = replace(candidate, problem_key=f"{candidate.problem_key}~row-{raw.number}")
                if candidate.problem_key in seen_keys:
                    self.report.rejections.append(RowRejection(
                        raw.number, raw.line,
                        f"the id {candidate.problem_key!r} is already used by row {seen_keys[candidate.problem_key]}: "
                        "ids must be unique within a promptset", candidate.problem_key,
                    ))
                    continue
                seen_statements[candidate.statement_hash] = raw.number
                seen_keys[candidate.problem_key] = raw.number
                self.report.rows_accepted += 1
                yield candidate

    def _batches(self) -> Iterator[tuple[list[RawRow], dict[str, str] | None]]:
        """The file's rows in batches, with the columns they are read by; a file error (``file_error``)
        ends the batches after the rows read before it."""
        batch: list[RawRow] = []
        batch_size = 0
        columns: dict[str, str] | None = None
        try:
            source: RowSource = open_rows(
                self.file, filename=self.filename, file_format=self.file_format, max_row_bytes=self.rules.limits.max_row_bytes,
            )
            self.report.file_format = source.file_format.value
            if source.columns is not None:
                columns = resolve_columns(self.mapping, source.columns, None)
                self.report.columns = columns
            for raw in source.rows:
                self.report.rows_read += 1
                if columns is None and not raw.read_error:
                    columns = resolve_columns(self.mapping, list(raw.values), raw.values)
                    self.report.columns = columns
                batch.append(raw)
                batch_size += raw.size
                if len(batch) == CHECK_BATCH_ROWS or batch_size >= CHECK_BATCH_SIZE:
                    yield batch, columns
                    batch, batch_size = [], 0
        except FileFormatError as error:
            self.report.file_error = str(error)
        if batch:
            yield batch, columns


class CheckWorkerDied(RuntimeError):
    """A process checking rows ended before it answered (killed, perhaps for want of memory)."""


class _CheckWorker:
    """One process that checks batches of rows, with pipes of its own.

    Not concurrent.futures' process pool: its workers share one result queue under a lock, and a worker
    killed while writing a result leaves the pool's reader waiting forever on half a message. Here
    nothing is shared: a worker that dies leaves its reader an end of file, which ``result`` turns into
    CheckWorkerDied. A thread hands the worker its batches, so that handing one over never waits on the
    worker while it waits for its last result to be read.
    """

    def __init__(self, rules: RowRules, earlier_workers: list[_CheckWorker]):
        context = multiprocessing.get_context("fork")
        tasks_in, self._tasks_out = context.Pipe(duplex=False)
        self._results_in, results_out = context.Pipe(duplex=False)
        # The worker closes the reader's ends it inherits (its own pipes' and the earlier workers'): with
        # the reader gone, its pipes must be at an end, so that it ends too.
        readers_ends = [self._tasks_out, self._results_in, *(end for worker in earlier_workers for end in worker.readers_ends)]
        self.process = context.Process(target=_check_batches_sent, args=(rules, tasks_in, results_out, readers_ends),
                                       daemon=True)
        self.process.start()
        # Only the worker may hold these ends, so that its death closes them.
        tasks_in.close()
        results_out.close()
        self._pending: queue.SimpleQueue = queue.SimpleQueue()
        self._feeder = threading.Thread(target=self._feed, daemon=True)

    @property
    def readers_ends(self) -> tuple:
        return self._tasks_out, self._results_in

    def start_feeding(self) -> None:
        self._feeder.start()

    def _feed(self) -> None:
        while True:
            batch = self._pending.get()
            try:
                # None tells the worker to end: workers forked later hold this pipe's end too, so closing it
                # here would not reach the worker as an end of file.
                self._tasks_out.send(batch)
            except OSError:
                return  # the worker is gone: result() says so
            if batch is None:
                return

    def submit(self, rows: list[RawRow], columns: dict[str, str] | None) -> None:
        self._pending.put((rows, columns))

    def result(self) -> list[CandidateProblem | RowRejection]:
        try:
            outcomes = self._results_in.recv()
        except (EOFError, OSError):
            raise CheckWorkerDied(f"a process checking the rows ended (exit status {self._exit_status()})") from None
        if isinstance(outcomes, Exception):
            raise outcomes
        return outcomes

    def _exit_status(self) -> int | None:
        self.process.join(timeout=1)
        return self.process.exitcode

    def stop(self, *, at_once: bool) -> None:
        self._pending.put(None)
        if at_once:
            self.process.kill()
        self.process.join(timeout=10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self._feeder.join()
        self._tasks_out.close()
        self._results_in.close()


def _check_batches_sent(rules: RowRules, tasks, results, readers_ends: list) -> None:
    """A worker's life: check each batch it is sent and send back the outcomes, until it is sent no more or
    its reader is gone."""
    for end in readers_ends:
        end.close()
    while True:
        try:
            batch = tasks.recv()
        except EOFError:
            return
        if batch is None:
            return
        rows, columns = batch
        try:
            outcomes = rules.outcomes(rows, columns)
        except Exception as error:  # noqa: BLE001 - a bug, not a row's fault: the reader raises it
            outcomes = error
        try:
            results.send(outcomes)
        except BrokenPipeError:
            return


@contextmanager
def _batch_checker(rules: RowRules, workers: int):
    """``check(batches)``: for each ``(rows, columns)``, ``(rows, columns, outcomes)``, in order; in this
    process, or by ``workers`` processes, handed batches in turn, with at most two batches each in flight."""
    if workers <= 1:
        yield lambda batches: ((rows, columns, rules.outcomes(rows, columns)) for rows, columns in batches)
        return
    # Every worker is forked before any thread starts, and while this process is small.
    pool: list[_CheckWorker] = []
    for _ in range(workers):
        pool.append(_CheckWorker(rules, earlier_workers=list(pool)))
    for worker in pool:
        worker.start_feeding()

    def check(batches):
        in_flight: deque = deque()
        for index, (rows, columns) in enumerate(batches):
            worker = pool[index % workers]
            worker.submit(rows, columns)
            in_flight.append((rows, columns, worker))
            if len(in_flight) >= 2 * workers:
                rows, columns, worker = in_flight.popleft()
                yield rows, columns, worker.result()
        while in_flight:
            rows, columns, worker = in_flight.popleft()
            yield rows, columns, worker.result()

    finished = False
    try:
        yield check
        finished = True
    finally:
        for worker in pool:
            worker.stop(at_once=not finished)


def check_file(file: BinaryIO, **options) -> IntakeReport:
    """The per-row report of a file, storing nothing, read in this process."""
    check = FileCheck(file, **options)
    for _ in check.candidates():
        pass
    return check.report
