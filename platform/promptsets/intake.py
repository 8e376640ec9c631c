"""From a file's rows to candidate problems: column mapping, per-row checks, duplicates.

Shared by the upload form, the API and the management commands, so every door applies the
same rules. Pure Python (no Django): ``check_rows`` streams, and keeps in memory only the
rejected rows and one fingerprint per accepted row (for duplicate detection).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, BinaryIO, Protocol

from promptsets.parsing import DEFAULT_MAX_ROW_BYTES, FileFormat, FileFormatError, RowSource, open_rows
from promptsets.validation import (
    DEFAULT_MAX_STATEMENT_CHARS,
    StatementRejected,
    informal_from_doc_comment,
    validate_lean_statement,
)

# The Kimina-Prover-RL recipe's preamble, given to rows whose statement brings none.
RECIPE_HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat"
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
            f"{self.rows_read:,} rows read, {self.rows_accepted:,} valid, {self.rows_rejected:,} rejected"
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
    """What actions.import_promptset stores from: ``FileCheck`` in this process (the management commands, the
    demo), or ``isolated_check.IsolatedFileCheck`` in a child process (uploads). ``report`` is one object,
    complete once ``candidates()`` is exhausted; its ``filename`` names the file in messages."""

    report: IntakeReport

    def candidates(self) -> Iterator[CandidateProblem]: ...


class FileCheck:
    """Reads a file row by row; ``candidates()`` yields valid problems and fills ``report``."""

    def __init__(
        self, file: BinaryIO, *, filename: str = "", file_format: FileFormat | str | None = None,
        mapping: ColumnMapping | None = None, limits: RowLimits | None = None, default_header: str = RECIPE_HEADER,
    ):
        self.file = file
        self.filename = filename
        self.file_format = FileFormat(file_format) if file_format else None
        self.mapping = mapping or ColumnMapping()
        self.limits = limits or RowLimits()
        self.default_header = default_header
        self.report = IntakeReport(filename=filename)

    def candidates(self) -> Iterator[CandidateProblem]:
        try:
            if self.default_header.strip():
                validate_lean_statement("example : True := by", header=self.default_header)
        except StatementRejected as error:
            self.report.file_error = f"the default header is not allowed: {error}"
            return
        try:
            yield from self._candidates()
        except FileFormatError as error:
            self.report.file_error = str(error)

    def _candidates(self) -> Iterator[CandidateProblem]:
        source: RowSource = open_rows(
            self.file, filename=self.filename, file_format=self.file_format, max_row_bytes=self.limits.max_row_bytes,
        )
        self.report.file_format = source.file_format.value
        columns: dict[str, str] | None = None
        if source.columns is not None:
            columns = resolve_columns(self.mapping, source.columns, None)
            self.report.columns = columns
        seen_statements: dict[str, int] = {}
        seen_keys: dict[str, int] = {}
        for raw in source.rows:
            self.report.rows_read += 1
            if raw.read_error:
                self.report.rejections.append(RowRejection(raw.number, raw.line, raw.read_error))
                continue
            if columns is None:
                columns = resolve_columns(self.mapping, list(raw.values), raw.values)
                self.report.columns = columns
            try:
                candidate = self._candidate(raw.number, raw.values, columns)
            except StatementRejected as error:
                key = self._key_for_report(raw.values, columns)
                self.report.rejections.append(RowRejection(raw.number, raw.line, str(error), key))
                continue
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

    def _key_for_report(self, values: dict[str, Any], columns: dict[str, str]) -> str:
        column = columns.get("problem_key")
        is_present, value = _lookup(values, column) if column else (False, None)
        return str(value)[:MAX_KEY_CHARS] if is_present and isinstance(value, (str, int)) else ""

    def _candidate(self, number: int, values: dict[str, Any], columns: dict[str, str]) -> CandidateProblem:
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


def check_file(file: BinaryIO, **options) -> IntakeReport:
    """The per-row report of a file, storing nothing, read in this process."""
    check = FileCheck(file, **options)
    for _ in check.candidates():
        pass
    return check.report
