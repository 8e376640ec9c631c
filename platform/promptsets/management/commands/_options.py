"""Options the promptset commands share: format, column mapping and limits, as the form offers them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError

from promptsets.intake import FIELD_LABELS, RECIPE_HEADER, CandidateProblem, ColumnMapping, FileCheck, RowLimits
from promptsets.parsing import DEFAULT_MAX_ROW_BYTES, FileFormat
from promptsets.upload_contract import max_row_bytes_problem, max_statement_chars_problem
from promptsets.validation import DEFAULT_MAX_STATEMENT_CHARS
from trainer.fields import split_assignment
from trainer.observability.progress import progress_bar


def add_file_options(parser) -> None:
    parser.add_argument("file", help="A .jsonl, .json, .parquet or .csv file.")
    parser.add_argument("--format", choices=[f.value for f in FileFormat], help="Override the format the name implies.")
    add_row_options(parser)


def add_row_options(parser) -> None:
    """How rows are read, whatever they come from: column mapping, default header, limits."""
    parser.add_argument(
        "--column", action="append", default=[], metavar="FIELD=COLUMN",
        help=f"Read FIELD from COLUMN (fields: {', '.join(FIELD_LABELS)}); repeatable. "
             "A dotted COLUMN reaches into nested objects, e.g. win_rate=rl_data.win_rate.",
    )
    parser.add_argument("--default-header", default=RECIPE_HEADER,
                        help="Preamble given to rows without imports of their own ('' for none).")
    parser.add_argument("--max-statement-chars", type=int, default=DEFAULT_MAX_STATEMENT_CHARS)
    parser.add_argument("--max-row-bytes", type=int, default=DEFAULT_MAX_ROW_BYTES)


def add_promptset_options(parser, *, what: str) -> None:
    """The new promptset's owner, name and sharing, and whether invalid rows are skipped or refuse ``what``."""
    parser.add_argument("--owner", required=True, help="Username of the owner.")
    parser.add_argument("--name", required=True, help="The promptset's name (unique per owner).")
    parser.add_argument("--description", default="")
    parser.add_argument("--public", action="store_true", help="Visible to every signed-in person.")
    parser.add_argument("--skip-invalid-rows", action="store_true",
                        help=f"Import the valid rows and report the others (default: reject the {what}).")


def owner_named(username: str):
    owner = get_user_model().objects.filter(username=username).first()
    if owner is None:
        raise CommandError(f"no user named {username!r}: create it first (manage.py createsuperuser)")
    return owner


def column_mapping(pairs: list[str]) -> ColumnMapping:
    mapping = {}
    for pair in pairs:
        try:
            field_name, column = split_assignment(pair, shape="FIELD=COLUMN", example="formal_statement=statement")
        except ValueError:
            field_name, column = "", ""
        if field_name not in FIELD_LABELS or not column:
            raise CommandError(
                f"--column takes FIELD=COLUMN with FIELD one of {', '.join(FIELD_LABELS)}; got {pair!r}"
            )
        mapping[field_name] = column
    return ColumnMapping(**mapping)


def row_limits(options) -> RowLimits:
    problem = max_statement_chars_problem(options["max_statement_chars"])
    if problem:
        raise CommandError(f"--max-statement-chars: {problem}")
    problem = max_row_bytes_problem(options["max_row_bytes"])
    if problem:
        raise CommandError(f"--max-row-bytes: {problem}")
    return RowLimits(max_row_bytes=options["max_row_bytes"], max_statement_chars=options["max_statement_chars"])


class ReadingShown:
    """A ``FileCheck`` whose reading shows on standard error as the trainer's long commands show theirs
    (``trainer.observability.progress``): a bar over the file's bytes with the rows read so far, on a terminal only."""

    def __init__(self, check: FileCheck):
        self.check = check

    @property
    def report(self):
        return self.check.report

    def candidates(self) -> Iterator[CandidateProblem]:
        file = self.check.file
        size = os.fstat(file.fileno()).st_size
        name = Path(self.check.filename).name
        with progress_bar(total=size, desc=name, unit="B", unit_scale=True, unit_divisor=1024) as bar:
            for candidate in self.check.candidates():
                # The position of the reader's buffer, not of this row: close enough for a bar.
                bar.update(file.tell() - bar.n)
                bar.set_postfix_str(f"{self.check.report.rows_read:,} rows", refresh=False)
                yield candidate
            if not self.check.report.file_error:
                bar.update(size - bar.n)
                bar.set_postfix_str(f"{self.check.report.rows_read:,} rows", refresh=False)
