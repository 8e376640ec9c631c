"""What people do with promptset versions: import a file's rows as version 1, curate a version into new
ones, add variants, create the demo and smoke promptsets.

The upload worker (promptsets/uploads.py), the API and the management commands call these functions,
so they apply the same validation. Each runs in one transaction: a failed import leaves nothing behind.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from promptsets import results
from promptsets.curation import AddVariants, CuratedPart, Entry, Rule, Sample, WinRateSource, apply_rule
from promptsets.demo import DEMO_PROBLEMS, DEMO_PROMPTSET_NAME, SMOKE_PROMPTSET_NAME
from trainer.sft.smoke_model import SMOKE_PROBLEMS
from promptsets.intake import (
    CandidateProblem,
    FileCheck,
    IntakeReport,
    RowCheck,
    RowLimits,
    statement_fingerprint,
)
from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem
from promptsets.validation import StatementRejected, validate_lean_statement

# Rejected rows kept with a version's rule and an upload's report: enough to fix a file by, bounded.
MAX_REJECTIONS_STORED = 1000

INSERT_BATCH_ROWS = 2000


class ImportRejected(Exception):
    """The file was not imported; ``report`` lists why (a file error or rejected rows)."""

    def __init__(self, report: IntakeReport, message: str):
        super().__init__(message)
        self.report = report


class PromptsetNameTaken(ValueError):
    pass


class _RollBack(Exception):
    pass


@dataclass
class ImportResult:
    promptset: Promptset
    version: PromptsetVersion
    report: IntakeReport


# Problem's fields that a CandidateProblem fills, in COPY's column order.
_COPIED_PROBLEM_FIELDS = ("problem_key", "name", "formal_statement", "informal_statement", "header", "source",
                          "source_win_rate", "statement_hash")
_copied_values = attrgetter(*_COPIED_PROBLEM_FIELDS)


def _copy_problems(promptset: Promptset, candidates: Iterable[CandidateProblem]) -> int:
    """Store ``candidates`` as problems of ``promptset`` with one PostgreSQL COPY; returns how many.

    COPY streams the rows as they come (no model instance per row, no SQL text per batch); the
    ids it draws from the sequence follow the candidates' order, which _list_problems relies on.
    """
    quote = connection.ops.quote_name
    columns = ", ".join(quote(Problem._meta.get_field(name).column)
                        for name in ("promptset", *_COPIED_PROBLEM_FIELDS, "created_at"))
    created_at = timezone.now()
    count = 0
    with connection.cursor() as cursor, \
            cursor.copy(f"COPY {quote(Problem._meta.db_table)} ({columns}) FROM STDIN") as copy:
        for candidate in candidates:
            copy.write_row((promptset.pk, *_copied_values(candidate), created_at))
            count += 1
    return count


def _list_problems(version: PromptsetVersion) -> None:
    """List every problem of the version's promptset in it, in id order (the file's, for a new promptset)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(VersionProblem._meta.db_table)} (version_id, problem_id, position, copies) "
            f"SELECT %s, id, row_number() OVER (ORDER BY id) - 1, 1 FROM {quote(Problem._meta.db_table)} "
            "WHERE promptset_id = %s",
            [version.pk, version.promptset_id],
        )


def import_promptset(
    owner, name: str, check: RowCheck, *, skip_invalid_rows: bool = False, description: str = "",
    is_public: bool = False,
) -> ImportResult:
    """A new promptset with its problems and version 1 from ``check``'s candidates, or ImportRejected and
    nothing stored.

    The caller builds the check: ``FileCheck`` over an open file (the management commands, the demo), or
    an ``IsolatedFileCheck`` already run (uploads: the child's progress is committed as it reads, not
    held in this transaction). Rows stream into PostgreSQL (COPY) as the candidates come; if a row is rejected
    and the person did not choose to skip invalid rows, inserting stops, the rest of the file is still
    checked (so that the report lists every rejected row) and the transaction rolls back.
    """
    name = name.strip()
    if not name:
        raise PromptsetNameTaken("a promptset needs a name")
    if Promptset.objects.filter(owner=owner, name=name).exists():
        raise PromptsetNameTaken(f"you already have a promptset named {name!r}: choose another name")
    report = check.report
    filename = report.filename
    try:
        with transaction.atomic():
            promptset = Promptset.objects.create(owner=owner, name=name, description=description, is_public=is_public)
            version = PromptsetVersion.objects.create(promptset=promptset, number=1)

            def storable() -> Iterator[CandidateProblem]:
                for candidate in check.candidates():
                    if report.rejections and not skip_invalid_rows:
                        continue  # keep reading only to report every rejected row
                    yield candidate

            stored = _copy_problems(promptset, storable())
            if report.file_error:
                raise _RollBack(f"{filename or 'the file'} cannot be read: {report.file_error}")
            if report.rejections and not skip_invalid_rows:
                raise _RollBack(
                    f"{report.rows_rejected:,} of {report.rows_read:,} rows were rejected, so nothing was imported: "
                    "fix them, or choose to skip invalid rows"
                )
            if not report.rows_accepted:
                raise _RollBack(f"{filename or 'the file'} holds no valid rows, so nothing was imported")
            _list_problems(version)
            version.problem_count = stored
            version.rule = {
                "kind": "upload", "filename": filename, "file_format": report.file_format, "columns": report.columns,
                "rows_read": report.rows_read, "rows_skipped": report.rows_rejected,
                "skipped_rows": [
                    {"row": r.row, "line": r.line, "reason": r.reason, "problem_key": r.problem_key}
                    for r in report.rejections[:MAX_REJECTIONS_STORED]
                ],
            }
            version.save(update_fields=["problem_count", "rule"])
    except _RollBack as rollback:
        raise ImportRejected(report, str(rollback)) from None
    except IntegrityError:
        # Lost a race with a second upload of the same name by the same person.
        raise PromptsetNameTaken(f"you already have a promptset named {name!r}: choose another name") from None
    return ImportResult(promptset, version, report)


def _entries_of(version: PromptsetVersion, *, with_platform_win_rates: bool,
                verified_by: list | None = None) -> list[tuple[VersionProblem, Entry]]:
    """The version's entries with their win rates; ``verified_by`` (a list) receives who verified the platform's."""
    rows = list(version.entries.select_related("problem").order_by("position"))
    # Curation is the owner's, so the win rates are over the runs the owner may see.
    rates, verifier = (results.platform_win_rates((row.problem_id for row in rows), viewer=version.promptset.owner)
                       if with_platform_win_rates else ({}, results.LEAN))
    if verified_by is not None:
        verified_by.append(verifier)
    entries = []
    for row in rows:
        accepted, scored = rates.get(row.problem_id, (0, 0))
        entries.append((row, Entry(
            problem_id=row.problem_id, copies=row.copies, file_win_rate=row.problem.source_win_rate,
            platform_win_rate=accepted / scored if scored else None,
        )))
    return entries


def _create_version(parent: PromptsetVersion, entries: list[Entry], rule: dict) -> PromptsetVersion:
    # Lock the promptset row so two curations at once cannot take the same number.
    Promptset.objects.select_for_update().get(pk=parent.promptset_id)
    number = (parent.promptset.versions.order_by("-number").values_list("number", flat=True).first() or 0) + 1
    version = PromptsetVersion.objects.create(
        promptset_id=parent.promptset_id, number=number, parent=parent, rule=rule,
        problem_count=len(entries),
    )
    VersionProblem.objects.bulk_create(
        (VersionProblem(version=version, problem_id=entry.problem_id, position=position, copies=entry.copies)
         for position, entry in enumerate(entries)),
        batch_size=INSERT_BATCH_ROWS,
    )
    return version


class CurationRefused(ValueError):
    pass


def curate(version: PromptsetVersion, rule: Rule) -> list[PromptsetVersion]:
    """New immutable versions made from ``version`` by ``rule`` (two for a split), parent recorded."""
    uses_platform = getattr(rule, "win_rate_source", None) is WinRateSource.PLATFORM
    verified_by: list[str] = []
    entries = [entry for _, entry in _entries_of(version, with_platform_win_rates=uses_platform,
                                                 verified_by=verified_by)]
    # Said on the version it makes: whose verdicts the platform's win rates counted.
    recorded = {"win_rates_verified_by": verified_by[0]} if uses_platform else {}
    if isinstance(rule, Sample) and rule.count > len(entries):
        raise CurationRefused(
            f"version {version.number} has {len(entries)} problems, so a random sample of {rule.count} cannot be drawn "
            f"from it: ask for at most {len(entries)}"
        )
    parts: list[CuratedPart] = apply_rule(entries, rule)
    if len(parts) > 1 and any(not part.entries for part in parts):
        raise CurationRefused(
            f"version {version.number} has {len(entries)} problems: too few to split into two non-empty parts"
        )
    if all(not part.entries for part in parts):
        raise CurationRefused(
            f"the rule keeps none of the {len(entries)} problems of version {version.number}: loosen it"
        )
    with transaction.atomic():
        return [
            _create_version(version, part.entries, {**rule.model_dump(mode="json"), **recorded,
                                                    **({"part": part.part} if part.part else {})})
            for part in parts
        ]


def add_variants(version: PromptsetVersion, problem: Problem, statements: list[str], *, endpoint_model: str = "",
                 limits: RowLimits | None = None) -> tuple[PromptsetVersion | None, list[str]]:
    """A new version: ``version`` plus each valid, new variant of ``problem``; and why others were refused."""
    limits = limits or RowLimits()
    refused: list[str] = []
    accepted: list[Problem] = []
    known_hashes = set(Problem.objects.filter(promptset_id=problem.promptset_id).values_list("statement_hash", flat=True))
    for index, text in enumerate(statements, start=1):
        try:
            statement = validate_lean_statement(text, header=problem.header, max_chars=limits.max_statement_chars)
        except StatementRejected as error:
            refused.append(f"variant {index}: {error}")
            continue
        fingerprint = statement_fingerprint(statement.formal_statement)
        if fingerprint in known_hashes:
            refused.append(f"variant {index}: the promptset already holds this statement")
            continue
        known_hashes.add(fingerprint)
        accepted.append(Problem(
            promptset_id=problem.promptset_id, problem_key=f"{problem.problem_key}~variant-{fingerprint[:10]}",
            name=statement.theorem_name or f"{problem.name} (variant)", formal_statement=statement.formal_statement,
            informal_statement=problem.informal_statement, header=statement.header or problem.header,
            source=f"variant of {problem.problem_key}"[:200], statement_hash=fingerprint,
        ))
    if not accepted:
        return None, refused
    with transaction.atomic():
        created = Problem.objects.bulk_create(accepted)
        entries = [entry for _, entry in _entries_of(version, with_platform_win_rates=False)]
        entries += [Entry(problem_id=variant.pk, copies=1) for variant in created]
        rule = AddVariants(problem_key=problem.problem_key, endpoint_model=endpoint_model,
                           added_keys=tuple(variant.problem_key for variant in created))
        new_version = _create_version(version, entries, rule.model_dump(mode="json"))
    return new_version, refused


def create_demo_promptset(owner) -> tuple[Promptset, bool]:
    """The public demo promptset of ``owner``, and whether it was created now."""
    rows = [problem.as_row() for problem in DEMO_PROBLEMS]
    return _create_public_promptset(
        owner, DEMO_PROMPTSET_NAME, rows, "demo.jsonl",
        "Closed arithmetic over ℕ, ℤ and ℚ that the stand-in Lean server decides: most true "
        "(some need norm_num, decide only works in ℕ), three false.")


def create_smoke_promptset(owner) -> tuple[Promptset, bool]:
    """The public smoke promptset of ``owner`` (the four problems the cpu-smoke model knows), and whether it was
    created now."""
    rows = [{"statement_id": problem.problem_id, "formal_statement": problem.formal_statement,
             "natural_language": problem.informal_statement, "header": problem.header, "source": problem.source}
            for problem in SMOKE_PROBLEMS]
    return _create_public_promptset(
        owner, SMOKE_PROMPTSET_NAME, rows, "smoke.jsonl",
        "The four problems the cpu-smoke preset's tiny model knows answers to by heart (trainer/sft/smoke_model.py): "
        "launch cpu-smoke on it to see answers reach Lean, earn rewards and become retries. A plumbing check.")


def _create_public_promptset(owner, name: str, rows: list[dict], filename: str,
                             description: str) -> tuple[Promptset, bool]:
    """A public promptset of ``owner`` created once, through the upload path (so validated alike)."""
    existing = Promptset.objects.filter(owner=owner, name=name).first()
    if existing is not None:
        return existing, False
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    try:
        result = import_promptset(owner, name, FileCheck(io.BytesIO(lines.encode()), filename=filename),
                                  is_public=True, description=description)
    except PromptsetNameTaken:  # created by a concurrent call
        return Promptset.objects.get(owner=owner, name=name), False
    return result.promptset, True
