"""The upload contract: what a person may choose when importing a promptset, and the bounds of it.

The upload form, the API (``POST /api/promptsets/…``) and the management commands all build an
upload's options with ``import_options`` and check a person's limits here, so no door accepts what
another refuses (as runs/launch_contract.py does for launches). What the bounds defend against:

- a statement limit under 100 characters refuses every real statement, and looks like a broken file;
- one over 200,000 lets a single row hold a worker's memory while it is validated and stored;
- a row limit under 1 KiB refuses rows before their statement is even read.

The rows themselves are checked by promptsets/intake.py, with the limits chosen here.
"""

from __future__ import annotations

from dataclasses import asdict

from promptsets.intake import ColumnMapping, RowLimits

MAX_STATEMENT_CHARS_LEAST = 100
MAX_STATEMENT_CHARS_MOST = 200_000
MAX_ROW_BYTES_LEAST = 1024


def max_statement_chars_problem(value: int) -> str | None:
    """Why ``value`` cannot be a row limit on a statement's length, or None when it can."""
    if MAX_STATEMENT_CHARS_LEAST <= value <= MAX_STATEMENT_CHARS_MOST:
        return None
    return (f"max_statement_chars must be from {MAX_STATEMENT_CHARS_LEAST} to {MAX_STATEMENT_CHARS_MOST}, "
            f"got {value}")


def max_row_bytes_problem(value: int) -> str | None:
    """Why ``value`` cannot be a limit on a row's size in bytes, or None when it can."""
    if value >= MAX_ROW_BYTES_LEAST:
        return None
    return f"max_row_bytes must be at least {MAX_ROW_BYTES_LEAST}, got {value}"


def import_options(*, file_format, mapping: ColumnMapping, skip_invalid_rows: bool, description: str, is_public: bool,
                   default_header: str, limits: RowLimits) -> dict:
    """An upload's choices as JSON, stored with it for the worker (promptsets/uploads.py ``run_upload``)."""
    return {"file_format": file_format, "mapping": asdict(mapping), "skip_invalid_rows": skip_invalid_rows,
            "description": description, "is_public": is_public, "default_header": default_header,
            "limits": asdict(limits)}
