"""Counts agree with their nouns and shares read as percentages (issue 45): "Verdict cache: 1 of verdicts not asked
of Lean (0.545 from other runs' verdicts)", "1 invalid rows", "Imported 40 rows read" were printed before. The
wording has one home each: the ``share`` filter (runs/templatetags/formatting.py), Django's ``pluralize``."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from promptsets.curation import describe_rule
from promptsets.intake import IntakeReport
from runs.templatetags.formatting import share

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("value", "shown"), [(1, "100%"), (0.545, "54.5%"), (0.0, "0%"), (None, "–"), (float("nan"), "–")])
def test_a_share_is_a_percentage_and_not_measured_is_never_0(value, shown):
    assert share(value) == shown


def test_an_evaluations_verdict_cache_is_said_in_percentages(make_run, alices_client):
    run = make_run(state="succeeded", kind="eval")
    run.evaluations.create(step=0, values={"problems": 2, "censored": 0, "verifier/cache_hit_rate": 1.0,
                                           "verifier/shared_cache_hit_rate": 0.545})
    page = alices_client.get(f"/runs/{run.pk}/").content.decode()
    assert ("Verdict cache: 100% of the verdicts were not asked of Lean (54.5% of all verdicts came from other runs')."
            in page)


def test_one_skipped_row_is_one_invalid_row():
    assert describe_rule({"kind": "upload", "filename": "a.jsonl", "rows_skipped": 1}) == "Uploaded from a.jsonl, 1 invalid row skipped"
    assert describe_rule({"kind": "upload", "filename": "a.jsonl", "rows_skipped": 3}) == "Uploaded from a.jsonl, 3 invalid rows skipped"


def test_one_row_read_is_one_row():
    assert IntakeReport(filename="a.jsonl", rows_read=1, rows_accepted=1).summary().startswith("1 row read, 1 valid, 0 rejected")


def test_an_imported_upload_says_what_was_imported_and_what_was_read(alice, alices_client, promptset_version):
    from promptsets.models import PromptsetUpload, UploadState

    upload = PromptsetUpload.objects.create(owner=alice, name="arith", filename="a.jsonl", staged_path="", options={},
                                            state=UploadState.IMPORTED, rows_read=40, promptset=promptset_version.promptset,
                                            report={"summary": IntakeReport(filename="a.jsonl", rows_read=40, rows_accepted=40).summary()})
    response = alices_client.get(reverse("promptsets:upload_status", args=[upload.pk]))
    assert [str(message) for message in get_messages(response.wsgi_request)] == [
        "Imported “arith”: 40 rows read, 40 valid, 0 rejected."]
