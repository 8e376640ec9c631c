"""Streaming readers for promptset files: JSON Lines, JSON arrays, Parquet and CSV.

Each reader yields one ``RawRow`` at a time from a binary file object, so a file of several
hundred megabytes never sits in memory whole; a single row is bounded by ``max_row_bytes``.
A problem confined to one row (a line that is not JSON, bytes that are not UTF-8, a row over
the size limit) becomes that row's ``read_error``; a problem that makes the rest of the file
unreadable (a truncated Parquet footer, a JSON array cut in the middle) raises
``FileFormatError``. Pure Python and pyarrow: no Django.

Why one piece: the four readers share one row contract (``RawRow``, ``read_error``,
``FileFormatError``) and its size bound; each is short, and together they are the one place that
knows file formats.
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, BinaryIO

DEFAULT_MAX_ROW_BYTES = 1024 * 1024
PARQUET_BATCH_ROWS = 64
# Checked from the Parquet footer before anything is decompressed (check_parquet_sizes).
MAX_PARQUET_ROW_GROUP_BYTES = 256 * 1024 * 1024
MAX_PARQUET_FOOTER_BYTES = 16 * 1024 * 1024
_READ_CHUNK_BYTES = 64 * 1024
_PARQUET_MAGIC = b"PAR1"
_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")


class FileFormat(StrEnum):
    JSONL = "jsonl"
    JSON = "json"
    PARQUET = "parquet"
    CSV = "csv"


FORMAT_BY_SUFFIX = {
    ".jsonl": FileFormat.JSONL, ".ndjson": FileFormat.JSONL, ".json": FileFormat.JSON,
    ".parquet": FileFormat.PARQUET, ".pq": FileFormat.PARQUET, ".csv": FileFormat.CSV,
}


class FileFormatError(ValueError):
    """The file as a whole cannot be read; the message says where, why, and what to do."""


@dataclass
class RawRow:
    number: int  # 1-based position of the record in the file
    line: int | None = None  # the line it starts on, for text formats
    values: dict[str, Any] | None = None
    read_error: str | None = None
    size: int = 0  # how large the row's values were as read (its text's bytes; Parquet: its strings' length)

    def __reduce__(self):
        # Sent to a check worker for every row: as its fields, at half the cost of a dataclass's state.
        return RawRow, (self.number, self.line, self.values, self.read_error, self.size)


@dataclass
class RowSource:
    """An open file and the rows in it; ``columns`` is known up front for Parquet and CSV."""

    file_format: FileFormat
    rows: Iterator[RawRow]
    columns: list[str] | None = field(default=None)


def detect_format(filename: str, head: bytes) -> FileFormat:
    """The format from the file's name, or from its first bytes when the name says nothing."""
    lowered = (filename or "").lower()
    for compression in (".gz", ".bz2", ".xz", ".zst", ".zip"):
        if lowered.endswith(compression):
            raise FileFormatError(
                f"{filename!r} is compressed ({compression}); decompress it and upload the "
                ".jsonl, .json, .parquet or .csv inside"
            )
    # Parquet's magic bytes win over the name: a Parquet file saved as .jsonl would otherwise be
    # read as hundreds of invalid text lines. No JSON or CSV text starts with them.
    if head.startswith(_PARQUET_MAGIC):
        return FileFormat.PARQUET
    for suffix, file_format in FORMAT_BY_SUFFIX.items():
        if lowered.endswith(suffix):
            return file_format
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if stripped.startswith(b"["):
        return FileFormat.JSON
    if stripped.startswith(b"{"):
        return FileFormat.JSONL
    raise FileFormatError(
        f"cannot tell the format of {filename or 'the file'!r} from its name or its first bytes: "
        "name it .jsonl, .json, .parquet or .csv, or choose the format in the form"
    )


def _reject_other_encodings(head: bytes, filename: str) -> None:
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or (len(head) >= 2 and (head[0] == 0) != (head[1] == 0)):
        raise FileFormatError(
            f"{filename or 'the file'!r} is UTF-16, not UTF-8: re-save it as UTF-8 (e.g. `iconv -f UTF-16 -t UTF-8`)"
        )


def _release(reader: io.TextIOWrapper) -> None:
    """Detach the text layer so that it does not close the caller's file when it is collected."""
    with contextlib.suppress(ValueError):  # the caller already closed the file
        reader.detach()


def _decode_utf8(raw: bytes) -> tuple[str | None, str | None]:
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as error:
        sample = raw[max(0, error.start - 10):error.start + 10]
        return None, (
            f"not valid UTF-8 (byte 0x{raw[error.start]:02x} at offset {error.start} of the row, near {sample!r}): "
            "re-save the file as UTF-8"
        )


def _too_long(size: int, max_row_bytes: int) -> str:
    return (
        f"the row is {size:,} bytes long; the limit is {max_row_bytes:,} bytes per row: "
        "shorten its fields or raise the limit"
    )


def _object_or_error(value: Any) -> tuple[dict | None, str | None]:
    if isinstance(value, dict):
        return value, None
    return None, f"the row is a JSON {type(value).__name__.replace('dict', 'object').replace('list', 'array')}, not an object with named fields"


def read_jsonl(file: BinaryIO, *, max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> Iterator[RawRow]:
    line_number = 0
    number = 0
    while True:
        raw = file.readline(max_row_bytes + 1)
        if not raw:
            return
        line_number += 1
        if len(raw) > max_row_bytes and not raw.endswith(b"\n"):
            size = len(raw)
            while raw and not raw.endswith(b"\n"):  # skip the rest of the over-long line in bounded pieces
                raw = file.readline(_READ_CHUNK_BYTES)
                size += len(raw)
            number += 1
            yield RawRow(number, line_number, read_error=_too_long(size, max_row_bytes))
            continue
        if line_number == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        if not raw.strip():
            continue
        number += 1
        text, error = _decode_utf8(raw)
        if error:
            yield RawRow(number, line_number, read_error=error)
            continue
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as decode_error:
            reason = decode_error.msg if isinstance(decode_error, json.JSONDecodeError) else "nested too deeply"
            yield RawRow(number, line_number, read_error=f"not valid JSON ({reason}): each line must be one JSON object")
            continue
        values, error = _object_or_error(value)
        yield RawRow(number, line_number, values=values, read_error=error, size=len(raw))


def read_json_array(file: BinaryIO, *, max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> Iterator[RawRow]:
    """Elements of a top-level JSON array, one at a time.

    Hand-written over ``json.JSONDecoder.raw_decode`` rather than an event parser such as
    ijson because each element must be bounded in size before it is built in memory.
    """
    decoder = json.JSONDecoder()
    reader = io.TextIOWrapper(file, encoding="utf-8-sig", errors="strict", newline="")
    state = {"buffer": "", "position": 0, "line": 1, "is_exhausted": False}

    def refill() -> bool:
        if state["is_exhausted"]:
            return False
        try:
            chunk = reader.read(_READ_CHUNK_BYTES)
        except UnicodeDecodeError as error:
            raise FileFormatError(
                f"the JSON array is not valid UTF-8 after line {state['line']} ({error.reason}): "
                "re-save the file as UTF-8"
            ) from None
        if not chunk:
            state["is_exhausted"] = True
            return False
        # Drop what was consumed so the buffer stays about one element long.
        state["buffer"] = state["buffer"][state["position"]:] + chunk
        state["position"] = 0
        return True

    def skip_whitespace() -> str:
        """The next significant character ('' at the end of the file), without consuming it."""
        while True:
            buffer, position = state["buffer"], state["position"]
            match = _JSON_WHITESPACE.match(buffer, position)
            state["line"] += buffer.count("\n", position, match.end())
            state["position"] = match.end()
            if state["position"] < len(buffer):
                return buffer[state["position"]]
            if not refill():
                return ""

    try:
        first = skip_whitespace()
        if first != "[":
            shown = state["buffer"][state["position"]:state["position"] + 20]
            raise FileFormatError(
                f"a .json promptset must be one JSON array of objects; it starts with {shown!r}: "
                "wrap the rows in [ ] or upload JSON Lines (.jsonl)"
            )
        state["position"] += 1
        number = 0
        if skip_whitespace() == "]":
            return
        while True:
            skip_whitespace()
            start_line = state["line"]
            while True:
                buffer, position = state["buffer"], state["position"]
                try:
                    value, end = decoder.raw_decode(buffer, position)
                    # A number at the end of the buffer may continue in the next chunk.
                    if end == len(buffer) and refill():
                        continue
                    break
                except json.JSONDecodeError as error:
                    if len(buffer) - position > max_row_bytes:
                        raise FileFormatError(
                            f"element {number + 1} of the JSON array (line {start_line}) is larger than "
                            f"{max_row_bytes:,} bytes, the limit per row: shorten it or raise the limit"
                        ) from None
                    # Running out of text and bad text both raise; only the former is worth more reading.
                    may_be_incomplete = error.pos >= len(buffer) - 16 or error.msg.startswith("Unterminated string")
                    if not (may_be_incomplete and refill()):
                        error_line = start_line + buffer.count("\n", position, error.pos)
                        raise FileFormatError(
                            f"element {number + 1} of the JSON array (line {error_line}) is "
                            f"not valid JSON ({error.msg}); the rest of the file cannot be read: fix the file, "
                            "or upload JSON Lines so that one bad row does not stop the others"
                        ) from None
                except RecursionError:
                    raise FileFormatError(
                        f"element {number + 1} of the JSON array (line {start_line}) is nested too deeply"
                    ) from None
            number += 1
            size = len(buffer[position:end].encode("utf-8", "surrogatepass"))
            state["line"] += buffer.count("\n", position, end)
            state["position"] = end
            if size > max_row_bytes:
                yield RawRow(number, start_line, read_error=_too_long(size, max_row_bytes))
            else:
                values, error = _object_or_error(value)
                yield RawRow(number, start_line, values=values, read_error=error, size=size)
            following = skip_whitespace()
            if following == ",":
                state["position"] += 1
                continue
            if following == "]":
                state["position"] += 1
                if skip_whitespace():
                    raise FileFormatError(
                        f"text after the closing ']' of the JSON array (line {state['line']}): remove it"
                    )
                return
            if not following:
                raise FileFormatError(
                    f"the JSON array ends after element {number} without a closing ']': the file looks truncated"
                )
            shown = state["buffer"][state["position"]:state["position"] + 20]
            raise FileFormatError(
                f"expected ',' or ']' after element {number} of the JSON array (line {state['line']}), got {shown!r}"
            )
    finally:
        _release(reader)


class _LineTooLong(Exception):
    def __init__(self, size: int, line: int):
        super().__init__(size, line)
        self.size, self.line = size, line


class _BoundedCsvLines:
    """Lines of a CSV file, each read with a bounded ``readline``: a 200 MB line is never in memory.

    An over-long line is skipped in bounded pieces and raises ``_LineTooLong`` once; the csv module
    resets at its next record, so the following rows are still read. Decoded leniently, so that
    one row's bad bytes become that row's error, not the file's.
    """

    def __init__(self, file: BinaryIO, max_line_bytes: int):
        self.file, self.max_line_bytes, self.line = file, max_line_bytes, 0

    def __iter__(self):
        return self

    def __next__(self) -> str:
        raw = self.file.readline(self.max_line_bytes + 1)
        if not raw:
            raise StopIteration
        self.line += 1
        if self.line == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        if len(raw) > self.max_line_bytes and not raw.endswith(b"\n"):
            size = len(raw)
            while raw and not raw.endswith(b"\n"):
                raw = self.file.readline(_READ_CHUNK_BYTES)
                size += len(raw)
            raise _LineTooLong(size, self.line)
        return raw.decode("utf-8", errors="surrogateescape")


def _has_undecodable(value: str) -> bool:
    return any("\udc80" <= char <= "\udcff" for char in value)


def open_csv(file: BinaryIO, *, max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> RowSource:
    csv.field_size_limit(max_row_bytes)
    lines = _BoundedCsvLines(file, max_row_bytes)
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        raise FileFormatError("the CSV file is empty: it needs a header line naming the columns") from None
    except _LineTooLong as error:
        raise FileFormatError(f"the CSV header line is {error.size:,} bytes long; the limit is {max_row_bytes:,} "
                              "bytes: is this a CSV file?") from None
    except csv.Error as error:
        raise FileFormatError(f"the CSV header line cannot be read ({error})") from None
    columns = [name.strip() for name in header]
    if any(_has_undecodable(name) for name in columns):
        raise FileFormatError("the CSV header line is not valid UTF-8: re-save the file as UTF-8")
    duplicates = sorted({name for name in columns if columns.count(name) > 1})
    if duplicates:
        raise FileFormatError(f"the CSV header names a column twice ({', '.join(duplicates)}): rename one of them")

    def rows() -> Iterator[RawRow]:
        number = 0
        while True:
            line = lines.line + 1
            try:
                record = next(reader)
            except StopIteration:
                return
            except _LineTooLong as error:
                number += 1
                yield RawRow(number, error.line, read_error=_too_long(error.size, max_row_bytes))
                continue
            except csv.Error as error:
                raise FileFormatError(
                    f"CSV record {number + 1} (line {line}) cannot be read ({error}); the rest of the file "
                    "cannot be trusted: fix the quoting or raise the size limit"
                ) from None
            if not record or all(not cell.strip() for cell in record):
                continue
            number += 1
            size = sum(len(cell) for cell in record)
            if size > max_row_bytes:
                yield RawRow(number, line, read_error=_too_long(size, max_row_bytes))
                continue
            if any(_has_undecodable(cell) for cell in record):
                yield RawRow(number, line, read_error="not valid UTF-8: re-save the file as UTF-8")
                continue
            if len(record) != len(columns):
                yield RawRow(number, line, read_error=(
                    f"has {len(record)} fields but the header names {len(columns)} columns: "
                    "check the quoting of commas and line breaks in this row"
                ))
                continue
            yield RawRow(number, line, values=dict(zip(columns, record)), size=size)

    return RowSource(FileFormat.CSV, rows(), columns)


def _parquet_footer_bytes(file: BinaryIO) -> int:
    """The footer's length, from the file's last 8 bytes, before pyarrow reads (and allocates) it."""
    file.seek(0, io.SEEK_END)
    size = file.tell()
    if size < 12:
        raise FileFormatError(f"not a readable Parquet file ({size} bytes is too short); upload it again")
    file.seek(size - 8)
    tail = file.read(8)
    file.seek(0)
    if tail[4:] != _PARQUET_MAGIC:
        raise FileFormatError("not a readable Parquet file (no PAR1 at its end); the file may be truncated: upload it again")
    return int.from_bytes(tail[:4], "little")


def check_parquet_sizes(parquet_file, *, max_row_bytes: int) -> None:
    """Refuse, from the metadata alone, a file whose rows would decompress past the limits.

    A 9 KB file can hold a 256 MB row (a long run of one character compresses to nothing);
    decompressing it first and measuring after would already have spent the memory. Each column
    chunk's uncompressed size is in the footer: a chunk larger than ``max_row_bytes`` per row has
    a row over the limit, and a row group over ``MAX_PARQUET_ROW_GROUP_BYTES`` is more than one
    batch should ever hold.
    """
    metadata = parquet_file.metadata
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        rows = max(group.num_rows, 1)
        for column in range(group.num_columns):
            chunk = group.column(column)
            if chunk.total_uncompressed_size > max_row_bytes * rows:
                raise FileFormatError(
                    f"column {chunk.path_in_schema!r} of row group {index + 1} holds {chunk.total_uncompressed_size:,} "
                    f"bytes uncompressed for {group.num_rows:,} rows, so a row is over the limit of {max_row_bytes:,} "
                    "bytes per row: shorten the long rows or raise the limit")
        if group.total_byte_size > MAX_PARQUET_ROW_GROUP_BYTES:
            raise FileFormatError(
                f"row group {index + 1} holds {group.total_byte_size:,} bytes uncompressed; the limit is "
                f"{MAX_PARQUET_ROW_GROUP_BYTES:,}: write the file with smaller row groups "
                "(pyarrow: pq.write_table(table, path, row_group_size=10_000))")


def open_parquet(file: BinaryIO, *, max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> RowSource:
    import pyarrow as pa
    import pyarrow.parquet as pq

    footer = _parquet_footer_bytes(file)
    if footer > MAX_PARQUET_FOOTER_BYTES:
        raise FileFormatError(f"the Parquet footer is {footer:,} bytes long; the limit is {MAX_PARQUET_FOOTER_BYTES:,}: "
                              "write the file with fewer row groups or columns")
    try:
        parquet_file = pq.ParquetFile(file)
    except (pa.ArrowException, OSError, ValueError) as error:
        raise FileFormatError(
            f"not a readable Parquet file ({error}); the file may be truncated: upload it again"
        ) from None
    check_parquet_sizes(parquet_file, max_row_bytes=max_row_bytes)
    columns = list(parquet_file.schema_arrow.names)

    def rows() -> Iterator[RawRow]:
        number = 0
        try:
            for batch in parquet_file.iter_batches(batch_size=PARQUET_BATCH_ROWS):
                for values in batch.to_pylist():
                    number += 1
                    size = sum(len(value) for value in values.values() if isinstance(value, (str, bytes)))
                    if size > max_row_bytes:
                        yield RawRow(number, read_error=_too_long(size, max_row_bytes))
                        continue
                    yield RawRow(number, values=values, size=size)
        except (pa.ArrowException, OSError, ValueError) as error:
            raise FileFormatError(
                f"the Parquet data after row {number} cannot be read ({error}); the file may be truncated or "
                "corrupt: upload it again"
            ) from None

    return RowSource(FileFormat.PARQUET, rows(), columns)


def open_rows(
    file: BinaryIO, *, filename: str = "", file_format: FileFormat | None = None,
    max_row_bytes: int = DEFAULT_MAX_ROW_BYTES,
) -> RowSource:
    """A ``RowSource`` over ``file`` (binary, seekable for Parquet); raises FileFormatError."""
    head = file.read(4)
    file.seek(0)
    if not head:
        raise FileFormatError(f"{filename or 'the file'!r} is empty")
    file_format = FileFormat(file_format) if file_format else detect_format(filename, head)
    if file_format is not FileFormat.PARQUET:
        _reject_other_encodings(head, filename)
    if file_format is FileFormat.JSONL:
        return RowSource(file_format, read_jsonl(file, max_row_bytes=max_row_bytes))
    if file_format is FileFormat.JSON:
        return RowSource(file_format, read_json_array(file, max_row_bytes=max_row_bytes))
    if file_format is FileFormat.CSV:
        return open_csv(file, max_row_bytes=max_row_bytes)
    return open_parquet(file, max_row_bytes=max_row_bytes)


def precheck(file: BinaryIO, *, filename: str = "", file_format: FileFormat | str | None = None,
             max_row_bytes: int = DEFAULT_MAX_ROW_BYTES) -> FileFormat:
    """What can be refused cheaply, before any row is read: the format, and a Parquet file's sizes.

    Reads the first bytes and, for Parquet, the footer (bounded by MAX_PARQUET_FOOTER_BYTES), never
    a row: safe in the web process. Text formats are bounded row by row while they are read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    head = file.read(4)
    file.seek(0)
    if not head:
        raise FileFormatError(f"{filename or 'the file'!r} is empty")
    file_format = FileFormat(file_format) if file_format else detect_format(filename, head)
    if file_format is FileFormat.PARQUET:
        footer = _parquet_footer_bytes(file)
        if footer > MAX_PARQUET_FOOTER_BYTES:
            raise FileFormatError(f"the Parquet footer is {footer:,} bytes long; the limit is "
                                  f"{MAX_PARQUET_FOOTER_BYTES:,}: write the file with fewer row groups or columns")
        try:
            parquet_file = pq.ParquetFile(file)
        except (pa.ArrowException, OSError, ValueError) as error:
            raise FileFormatError(f"not a readable Parquet file ({error}); the file may be truncated: upload it again") from None
        check_parquet_sizes(parquet_file, max_row_bytes=max_row_bytes)
        file.seek(0)
    return file_format
