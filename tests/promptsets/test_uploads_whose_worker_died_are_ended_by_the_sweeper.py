"""An upload whose worker died (killed, redeployed, out of memory) does not say "checking" for ever: the
sweeper's pass ends it as rejected, saying what happened and to upload again, and deletes its staged file.
An upload whose worker still writes progress, or is storing its promptset, is left alone."""

import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.utils import timezone

from promptsets import uploads
from promptsets.hub_import import HubSource
from promptsets.intake import RECIPE_HEADER, ColumnMapping, RowLimits
from promptsets.models import Promptset, PromptsetUpload, UploadState
from promptsets.upload_contract import import_options
from runs.sweeper import Sweeper
from tests.promptsets.conftest import encode, kimina_rows

# The sweeper drops connections left in a transaction (close_old_connections), so each test commits for real.
pytestmark = pytest.mark.django_db(transaction=True)

OPTIONS = import_options(file_format=None, mapping=ColumnMapping(), skip_invalid_rows=False, description="",
                         is_public=False, default_header=RECIPE_HEADER, limits=RowLimits())


@pytest.fixture(autouse=True)
def stalled_after_ten_minutes(settings):
    settings.UPLOAD_STALLED_AFTER_S = 600


def staged(owner, name: str) -> PromptsetUpload:
    """An upload as the form leaves it: its file on the artifact volume, waiting for a worker (none is called)."""
    return uploads.stage_upload(owner, name, SimpleUploadedFile("k.jsonl", encode(kimina_rows(3), "jsonl")),
                                options=OPTIONS)


def left_by_a_worker(upload: PromptsetUpload, *, state: str, rows_read: int, silent_for: timedelta) -> None:
    """What a worker leaves behind: the state it had reached and its last progress, written ``silent_for`` ago."""
    PromptsetUpload.objects.filter(pk=upload.pk).update(state=state, rows_read=rows_read,
                                                        updated_at=timezone.now() - silent_for)


def test_an_upload_left_checking_by_a_dead_worker_is_rejected_on_the_sweepers_pass_and_a_fresh_one_is_untouched(
        alice, client, ray_head):
    dead, alive, waiting = staged(alice, "dead"), staged(alice, "alive"), staged(alice, "waiting")
    left_by_a_worker(dead, state=UploadState.CHECKING, rows_read=1500, silent_for=timedelta(minutes=11))
    left_by_a_worker(alive, state=UploadState.CHECKING, rows_read=10, silent_for=timedelta(minutes=9))
    # Waiting for a worker is not stalling: the queue may be long.
    PromptsetUpload.objects.filter(pk=waiting.pk).update(updated_at=timezone.now() - timedelta(hours=1))

    Sweeper().sweep_once()

    dead.refresh_from_db()
    assert dead.state == UploadState.REJECTED and dead.is_finished and dead.finished_at is not None
    assert dead.failure.startswith("the worker checking this upload stopped after 1,500 rows and wrote nothing for 66")  # 11 minutes
    assert dead.failure.endswith("nothing was stored: upload the file again")
    assert not Path(dead.staged_path).exists() and not Promptset.objects.exists()
    client.force_login(alice)
    status = client.get(f"/api/promptsets/uploads/{dead.pk}").json()
    assert (status["state"], status["is_finished"], status["failure"]) == ("rejected", True, dead.failure)

    alive.refresh_from_db()
    waiting.refresh_from_db()
    assert (alive.state, alive.failure, waiting.state) == (UploadState.CHECKING, "", UploadState.PENDING)
    assert Path(alive.staged_path).exists() and Path(waiting.staged_path).exists()
    for upload in (alive, waiting):
        Path(upload.staged_path).unlink()


def test_a_dataset_whose_reading_stalled_is_ended_with_its_half_written_file_and_told_to_import_again(alice):
    upload = uploads.stage_dataset_import(alice, "numina", HubSource(name="AI-MO/NuminaMath-LEAN"), options=OPTIONS,
                                          check_in_this_process=True)
    half_written = Path(upload.staged_path + ".partial")
    half_written.write_text('{"formal_statement": "theorem t : 1 = 1 := by"}\n')
    left_by_a_worker(upload, state=UploadState.STAGING, rows_read=4000, silent_for=timedelta(minutes=30))

    assert uploads.end_stalled_uploads() == 1

    upload.refresh_from_db()
    assert upload.state == UploadState.REJECTED
    assert upload.failure.startswith("the worker reading this dataset stopped after 4,000 rows")
    assert upload.failure.endswith("nothing was stored: import the dataset again")
    assert not half_written.exists()


def test_an_upload_whose_worker_is_storing_its_promptset_is_never_ended_under_it(alice, settings):
    settings.UPLOAD_STALLED_AFTER_S = 0  # any upload at work counts as stalled, unless its worker holds it
    upload = staged(alice, "storing")
    left_by_a_worker(upload, state=UploadState.CHECKING, rows_read=3, silent_for=timedelta(minutes=1))
    locked, release = threading.Event(), threading.Event()

    def worker_storing_the_promptset():
        # run_upload holds this lock for as long as the import's transaction lasts.
        try:
            with transaction.atomic():
                PromptsetUpload.objects.select_for_update().get(pk=upload.pk)
                locked.set()
                release.wait(timeout=30)
        finally:
            connection.close()

    worker = threading.Thread(target=worker_storing_the_promptset)
    worker.start()
    try:
        assert locked.wait(timeout=30)
        assert uploads.end_stalled_uploads() == 0
        upload.refresh_from_db()
        assert upload.state == UploadState.CHECKING
    finally:
        release.set()
        worker.join()
    assert uploads.end_stalled_uploads() == 1  # once its worker is gone, it is ended like any other
