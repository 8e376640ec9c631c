"""What people do with promptsets: import a file or a dataset, curate a version, add variants.

The upload form, the API and the management commands call these functions, so they apply
the same validation. Each runs in one transaction: a failed import leaves nothing behind.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, Q
from django.utils import timezone

from promptsets.curation import AddVariants, CuratedPart, Entry, Rule, Sample, WinRateSource, apply_rule
from promptsets.intake import (
    CandidateProblem,
    ColumnMapping,
    FileCheck,
    IntakeReport,
    RowCheck,
    RowLimits,
    statement_fingerprint,
)
from promptsets.hub_import import HubSource, HubSourceError, allowed_folder, stage_dataset
from promptsets.models import Problem, Promptset, PromptsetUpload, PromptsetVersion, VersionProblem

INSERT_BATCH_ROWS = 2000
MAX_REJECTIONS_STORED = 1000


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


def platform_win_rates(problem_ids, *, viewer) -> dict[int, tuple[int, int]]:
    """Problem id -> (accepted, scored) over the first attempts of the runs ``viewer`` may see; censored excluded.

    Only visible runs count (Run.visible_to): others' private results never pool into what a person sees.

    First attempts only: a retry sees Lean's feedback, so its success says less about how
    hard the statement is. Censored attempts (verifier outages, stand-in "cannot decide") have
    no reward and are not counted as wrong; a Lean timeout scored 0 and counts as wrong.
    """
    from proofs.models import ProofAttempt, Turn

    problem_ids = list(problem_ids)
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    scored = ProofAttempt.objects.visible_to(viewer).filter(turn=Turn.FIRST, reward__isnull=False)
    by_foreign_key = (
        scored.filter(problem_id__in=problem_ids).values("problem_id")
        .annotate(accepted=Count("id", filter=Q(reward__gte=1)), scored=Count("id"))
    )
    for row in by_foreign_key:
        totals[row["problem_id"]][0] += row["accepted"]
        totals[row["problem_id"]][1] += row["scored"]
    # Attempts the ingester could not link to a Problem row still name the problem by key.
    keys = {
        (promptset_id, key): pk
        for pk, promptset_id, key in Problem.objects.filter(pk__in=problem_ids).values_list("pk", "promptset_id", "problem_key")
    }
    by_key = (
        scored.filter(problem__isnull=True, problem_key__in={key for _, key in keys})
        .values("run__promptset_version__promptset_id", "problem_key")
        .annotate(accepted=Count("id", filter=Q(reward__gte=1)), scored=Count("id"))
    )
    for row in by_key:
        pk = keys.get((row["run__promptset_version__promptset_id"], row["problem_key"]))
        if pk is not None:
            totals[pk][0] += row["accepted"]
            totals[pk][1] += row["scored"]
    return {pk: (accepted, total) for pk, (accepted, total) in totals.items()}


def _entries_of(version: PromptsetVersion, *, with_platform_win_rates: bool) -> list[tuple[VersionProblem, Entry]]:
    rows = list(version.entries.select_related("problem").order_by("position"))
    # Curation is the owner's, so the win rates are over the runs the owner may see.
    rates = (platform_win_rates((row.problem_id for row in rows), viewer=version.promptset.owner)
             if with_platform_win_rates else {})
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
    entries = [entry for _, entry in _entries_of(version, with_platform_win_rates=uses_platform)]
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
            _create_version(version, part.entries, {**rule.model_dump(mode="json"), **({"part": part.part} if part.part else {})})
            for part in parts
        ]


def add_variants(version: PromptsetVersion, problem: Problem, statements: list[str], *, endpoint_model: str = "",
                 limits: RowLimits | None = None) -> tuple[PromptsetVersion | None, list[str]]:
    """A new version: ``version`` plus each valid, new variant of ``problem``; and why others were refused."""
    from promptsets.validation import StatementRejected, validate_lean_statement

    limits = limits or RowLimits()
    refused: list[str] = []
    accepted: list[Problem] = []
    known_hashes = set(Problem.objects.filter(promptset_id=problem.promptset_id).values_list("statement_hash", flat=True))
    for index, text in enumerate(statements, start=1):
        try:
            statement = validate_lean_statement(text, header=problem.header if not text.lstrip().startswith("import") else "",
                                                max_chars=limits.max_statement_chars)
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
    """The public demo promptset of ``owner`` (created through the upload path, so validated alike)."""
    import io
    import json

    from promptsets.demo import DEMO_PROBLEMS, DEMO_PROMPTSET_NAME

    existing = Promptset.objects.filter(owner=owner, name=DEMO_PROMPTSET_NAME).first()
    if existing is not None:
        return existing, False
    lines = "".join(json.dumps(problem.as_row(), ensure_ascii=False) + "\n" for problem in DEMO_PROBLEMS)
    try:
        result = import_promptset(
            owner, DEMO_PROMPTSET_NAME, FileCheck(io.BytesIO(lines.encode()), filename="demo.jsonl"), is_public=True,
            description="Closed arithmetic over ℕ, ℤ and ℚ that the stand-in Lean server decides: most true "
                        "(some need norm_num, decide only works in ℕ), three false.",
        )
    except PromptsetNameTaken:  # created by a concurrent call
        return Promptset.objects.get(owner=owner, name=DEMO_PROMPTSET_NAME), False
    return result.promptset, True


# Uploads through the form and the API: staged on the artifact volume, checked by a Celery task in a
# child process with a memory ceiling (promptsets/isolated_check.py), never parsed by the web process.

UPLOAD_COPY_CHUNK_BYTES = 1024 * 1024


def stage_upload(owner, name: str, uploaded, *, options: dict, dry_run: bool = False) -> "PromptsetUpload":
    """Keep the uploaded file for the worker and queue its check; refuse at once what the metadata refuses.

    ``options`` are the check's and import_promptset's choices in JSON form (file_format, mapping,
    skip_invalid_rows, description, is_public, default_header, limits). A ``dry_run`` is checked and
    reported, never imported (its name need not be free). Raises PromptsetNameTaken, or ImportRejected
    for a Parquet file whose footer already says a row is too large.
    """
    from promptsets.models import PromptsetUpload
    from promptsets.parsing import FileFormatError, precheck

    name = name.strip() if dry_run else _free_name(owner, name)
    suffix = "".join(c for c in Path(uploaded.name or "").suffix.lower() if c.isalnum() or c == ".")[:10]
    staged = _staged_path(suffix)
    size = 0
    with staged.open("wb") as out:
        for chunk in uploaded.chunks(UPLOAD_COPY_CHUNK_BYTES):
            out.write(chunk)
            size += len(chunk)
    try:
        with staged.open("rb") as file:
            precheck(file, filename=uploaded.name, file_format=options.get("file_format"),
                     max_row_bytes=options["limits"]["max_row_bytes"])
    except FileFormatError as error:
        staged.unlink(missing_ok=True)
        report = IntakeReport(filename=uploaded.name, file_error=str(error))
        raise ImportRejected(report, f"{uploaded.name} cannot be read: {error}") from None
    with transaction.atomic():
        upload = PromptsetUpload.objects.create(owner=owner, name=name, filename=uploaded.name or "",
                                                staged_path=str(staged), options=options, bytes_total=size,
                                                dry_run=dry_run)
        transaction.on_commit(lambda: _enqueue_check(upload.pk))
    return upload


def _free_name(owner, name: str) -> str:
    name = name.strip()
    if not name:
        raise PromptsetNameTaken("a promptset needs a name")
    if Promptset.objects.filter(owner=owner, name=name).exists():
        raise PromptsetNameTaken(f"you already have a promptset named {name!r}: choose another name")
    return name


def _staged_path(suffix: str) -> Path:
    import uuid

    from django.conf import settings

    folder = settings.ARTIFACTS_DIR / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{uuid.uuid4().hex}{suffix}"


def checked_source(source: HubSource) -> HubSource:
    """``source`` as it may be read: a folder resolved and inside PROMPTSET_IMPORT_ROOTS, or HubSourceError."""
    from dataclasses import replace

    from django.conf import settings

    if not source.path:
        return source
    return replace(source, path=str(allowed_folder(source.path, settings.PROMPTSET_IMPORT_ROOTS)))


def stage_dataset_import(owner, name: str, source: HubSource, *, options: dict,
                         check_in_this_process: bool = False) -> "PromptsetUpload":
    """An upload that reads a Hub dataset or a server folder: the worker stages its rows as JSON Lines, then
    checks and imports them as it does a file. Refuses at once a taken name (PromptsetNameTaken) or a folder
    outside PROMPTSET_IMPORT_ROOTS (HubSourceError); the dataset itself is read by the worker.

    ``options`` are stage_upload's; the format is always the staged JSON Lines. A management command
    passes ``check_in_this_process`` and runs run_upload itself instead of queueing the worker.
    """
    from promptsets.models import UploadSource

    name = _free_name(owner, name)
    source = checked_source(source)
    with transaction.atomic():
        upload = PromptsetUpload.objects.create(
            owner=owner, name=name, filename=source.describe()[:300], staged_path=str(_staged_path(".jsonl")),
            source=UploadSource.FOLDER if source.path else UploadSource.HUB, dataset=source.as_dict(),
            options={**options, "file_format": "jsonl"})
        if not check_in_this_process:
            transaction.on_commit(lambda: _enqueue_check(upload.pk))
    return upload


def _enqueue_check(upload_id: int) -> None:
    from promptsets.tasks import check_upload

    check_upload.delay(upload_id)


def run_upload(upload_id: int) -> None:
    """The worker's side: check the staged file in a child process, then import it (or, for a dry run, keep
    only the report) or record why not. Every write says the upload is alive (``updated_at``); one the
    sweeper ended meanwhile (end_stalled_uploads) is left ended, and nothing of it is stored."""
    from django.utils import timezone

    from promptsets.isolated_check import IsolatedFileCheck
    from promptsets.models import PromptsetUpload, UploadState

    upload = PromptsetUpload.objects.filter(pk=upload_id).first()
    if upload is None:
        return  # deleted before a worker came to it
    source = upload.hub_source()
    first_state = UploadState.CHECKING if source is None else UploadState.STAGING
    claimed = PromptsetUpload.objects.filter(pk=upload_id, state=UploadState.PENDING).update(
        state=first_state, updated_at=timezone.now())
    if not claimed:
        return  # already checked (a redelivered task)
    if source is not None and not _stage(upload, source):
        return
    options = upload.options

    def progress(rows_read: int, bytes_read: int, bytes_total: int) -> None:
        _record_work(upload_id, rows_read=rows_read, bytes_read=bytes_read)

    check = IsolatedFileCheck(upload.staged_path, filename=upload.filename, file_format=options.get("file_format"),
                              mapping=ColumnMapping(**options["mapping"]), limits=RowLimits(**options["limits"]),
                              default_header=options["default_header"], on_progress=progress)
    try:
        check.run()  # before the transaction below, so that its progress is committed as it goes
        with transaction.atomic():
            # The lock is held until the promptset is stored: the sweeper skips a locked upload, and finds
            # here whether it ended this one while the child was reading.
            if not _working_uploads().select_for_update().filter(pk=upload_id).exists():
                return
            outcome = _dry_run_outcome(check) if upload.dry_run else _import_outcome(upload, check)
            _record_work(upload_id, **outcome, rows_read=check.report.rows_read, bytes_read=upload.bytes_total,
                         peak_memory_bytes=check.peak_memory_bytes, finished_at=timezone.now())
    except Exception as error:  # the upload must end, with the reason, whatever went wrong
        _record_work(upload_id, state=UploadState.REJECTED, failure=f"the upload could not be checked: {error}",
                     finished_at=timezone.now())
        raise
    finally:
        Path(upload.staged_path).unlink(missing_ok=True)
        check.close()


def _dry_run_outcome(check) -> dict:
    from promptsets.models import UploadState

    return {"state": UploadState.CHECKED, "report": _stored_report(check.report)}


def _import_outcome(upload: "PromptsetUpload", check) -> dict:
    from promptsets.models import UploadState

    options = upload.options
    try:
        result = import_promptset(upload.owner, upload.name, check, skip_invalid_rows=options["skip_invalid_rows"],
                                  description=options["description"], is_public=options["is_public"])
    except ImportRejected as rejected:
        return {"state": UploadState.REJECTED, "failure": str(rejected), "report": _stored_report(rejected.report)}
    except PromptsetNameTaken as error:
        return {"state": UploadState.REJECTED, "failure": str(error)}
    return {"state": UploadState.IMPORTED, "promptset": result.promptset, "report": _stored_report(result.report)}


def _working_uploads():
    from promptsets.models import WORKING_STATES, PromptsetUpload

    return PromptsetUpload.objects.filter(state__in=WORKING_STATES)


def _record_work(upload_id: int, **fields) -> bool:
    """Write the worker's news of an upload still at work, saying it is alive; False if it was ended meanwhile."""
    from django.utils import timezone

    return bool(_working_uploads().filter(pk=upload_id).update(**fields, updated_at=timezone.now()))


def _stage(upload: "PromptsetUpload", source: HubSource) -> bool:
    """Write the dataset's rows to the upload's staged file (rows_read counts them), or end the upload
    rejected with the reason; True when the check may begin."""
    from django.utils import timezone

    from promptsets.models import UploadState

    staged = Path(upload.staged_path)
    try:
        stage_dataset(checked_source(source), staged, on_progress=lambda rows: _record_work(upload.pk, rows_read=rows))
    except HubSourceError as error:
        report = IntakeReport(filename=upload.filename, file_error=str(error))
        _record_work(upload.pk, state=UploadState.REJECTED, failure=str(error), report=_stored_report(report),
                     finished_at=timezone.now())
        return False
    except Exception as error:  # the upload must end, with the reason, whatever went wrong
        _record_work(upload.pk, state=UploadState.REJECTED, failure=f"the dataset could not be staged: {error}",
                     finished_at=timezone.now())
        staged.unlink(missing_ok=True)
        raise
    upload.bytes_total = staged.stat().st_size
    if not _record_work(upload.pk, state=UploadState.CHECKING, bytes_total=upload.bytes_total, rows_read=0):
        staged.unlink(missing_ok=True)  # ended by the sweeper while the dataset was read
        return False
    return True


STALLED_UPLOAD_FAILURE = (
    "the worker {doing} stopped after {rows:,} rows and wrote nothing for {seconds:,.0f} s (it was restarted, "
    "or ran out of memory); nothing was stored: {again}"
)


def end_stalled_uploads() -> int:
    """End as rejected each upload being staged or checked whose worker wrote nothing for
    UPLOAD_STALLED_AFTER_S (its worker died: killed, redeployed, out of memory), and delete its staged file;
    how many were ended. Run by the sweeper on each pass.

    An upload whose promptset is being stored is locked by its worker (run_upload) and skipped, so a slow
    import is never ended under its worker; the import is one transaction, so an ended upload stored nothing.
    """
    from datetime import timedelta

    from django.conf import settings
    from django.utils import timezone

    from promptsets.models import UploadSource, UploadState

    now = timezone.now()
    with transaction.atomic():
        stalled = list(
            _working_uploads().select_for_update(skip_locked=True)
            .filter(updated_at__lt=now - timedelta(seconds=settings.UPLOAD_STALLED_AFTER_S))
            .only("pk", "state", "source", "rows_read", "updated_at", "staged_path")
        )
        for upload in stalled:
            failure = STALLED_UPLOAD_FAILURE.format(
                doing="reading this dataset" if upload.state == UploadState.STAGING else "checking this upload",
                rows=upload.rows_read, seconds=(now - upload.updated_at).total_seconds(),
                again="upload the file again" if upload.source == UploadSource.FILE else "import the dataset again")
            _working_uploads().filter(pk=upload.pk).update(state=UploadState.REJECTED, failure=failure,
                                                           finished_at=now, updated_at=now)
    for upload in stalled:
        Path(upload.staged_path).unlink(missing_ok=True)
        Path(upload.staged_path + ".partial").unlink(missing_ok=True)
    return len(stalled)


def _stored_report(report: IntakeReport) -> dict:
    data = report.as_dict()
    data["rejections"] = data["rejections"][:MAX_REJECTIONS_STORED]
    return data
