"""Uploads, through the form, the API and the management commands: a file or a dataset staged on the
artifact volume, checked by a Celery worker in a child process with a memory ceiling
(promptsets/isolated_check.py), never parsed by the web process, then imported as a new promptset
(promptsets/versions.py). The sweeper ends the uploads whose worker died (``end_stalled_uploads``).

An upload's options and their bounds are the upload contract's (promptsets/upload_contract.py).
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from promptsets.hub_import import HubSource, HubSourceError, allowed_folder, stage_dataset
from promptsets.intake import ColumnMapping, IntakeReport, RowLimits
from promptsets.isolated_check import IsolatedFileCheck
from promptsets.models import WORKING_STATES, Promptset, PromptsetUpload, UploadSource, UploadState
from promptsets.parsing import FileFormatError, precheck
from promptsets.versions import MAX_REJECTIONS_STORED, ImportRejected, PromptsetNameTaken, import_promptset

UPLOAD_COPY_CHUNK_BYTES = 1024 * 1024


def stage_upload(owner, name: str, uploaded, *, options: dict, dry_run: bool = False) -> "PromptsetUpload":
    """Keep the uploaded file for the worker and queue its check; refuse at once what the metadata refuses.

    ``options`` are the check's and import_promptset's choices in JSON form (file_format, mapping,
    skip_invalid_rows, description, is_public, default_header, limits). A ``dry_run`` is checked and
    reported, never imported (its name need not be free). Raises PromptsetNameTaken, or ImportRejected
    for a Parquet file whose footer already says a row is too large.
    """
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


    folder = settings.ARTIFACTS_DIR / "uploads"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{uuid.uuid4().hex}{suffix}"


def checked_source(source: HubSource) -> HubSource:
    """``source`` as it may be read: a folder resolved and inside PROMPTSET_IMPORT_ROOTS, or HubSourceError."""
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


@shared_task(name="promptsets.check_upload")
def check_upload(upload_id: int) -> None:
    """The Celery task that checks a staged upload and imports it (``run_upload``). Defined here, beside
    what it runs, so that queueing it never imports back (promptsets/tasks.py lists it for Celery)."""
    run_upload(upload_id)


def _enqueue_check(upload_id: int) -> None:
    check_upload.delay(upload_id)


def run_upload(upload_id: int) -> None:
    """The worker's side: check the staged file in a child process, then import it (or, for a dry run, keep
    only the report) or record why not. Every write says the upload is alive (``updated_at``); one the
    sweeper ended meanwhile (end_stalled_uploads) is left ended, and nothing of it is stored."""
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

    return {"state": UploadState.CHECKED, "report": _stored_report(check.report)}


def _import_outcome(upload: "PromptsetUpload", check) -> dict:

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

    return PromptsetUpload.objects.filter(state__in=WORKING_STATES)


def _record_work(upload_id: int, **fields) -> bool:
    """Write the worker's news of an upload still at work, saying it is alive; False if it was ended meanwhile."""
    return bool(_working_uploads().filter(pk=upload_id).update(**fields, updated_at=timezone.now()))


def _stage(upload: "PromptsetUpload", source: HubSource) -> bool:
    """Write the dataset's rows to the upload's staged file (rows_read counts them), or end the upload
    rejected with the reason; True when the check may begin."""
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
