"""The API imports, validates, lists and curates with the same rules as the pages."""

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from promptsets.models import Promptset, PromptsetUpload, PromptsetVersion
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def post_file(client, checked_at_once):
    """Post a file to the API; an upload is checked once committed, as the worker would."""

    def post(path, rows, filename="k.jsonl", **fields):
        data = rows if isinstance(rows, bytes) else encode(rows, filename.rsplit(".", 1)[1])
        with checked_at_once():
            return client.post(f"/api/promptsets/{path}",
                               {"name": "api set", "file": SimpleUploadedFile(filename, data), **fields})

    return post


def test_an_upload_returns_202_and_its_status_then_shows_the_promptset_and_its_report(client, alice, post_file):
    client.force_login(alice)
    response = post_file("", kimina_rows(4), filename="k.parquet")
    assert response.status_code == 202, response.content
    assert response.json()["state"] == "pending"  # answered before the worker checked it
    body = client.get(response.json()["status_url"]).json()
    assert body["state"] == "imported" and body["is_finished"] and body["report"]["rows_accepted"] == 4
    promptset = Promptset.objects.get()
    assert body["promptset_id"] == promptset.pk and promptset.owner == alice


def test_a_rejected_upload_lists_every_rejected_row_and_stores_nothing(client, alice, post_file):
    client.force_login(alice)
    rows = kimina_rows(3)
    rows[0]["formal_statement"] = rows[2]["formal_statement"] = "example : True := by trivial"
    response = post_file("", rows)
    body = client.get(response.json()["status_url"]).json()
    assert body["state"] == "rejected" and body["promptset_id"] is None
    assert [r["row"] for r in body["report"]["rejections"]] == [1, 3]
    assert not Promptset.objects.exists()


def test_someone_elses_upload_is_not_found(client, alice, charlie, post_file):
    client.force_login(alice)
    status_url = post_file("", kimina_rows(1)).json()["status_url"]
    client.force_login(charlie)
    assert client.get(status_url).status_code == 404


def test_the_validate_endpoint_is_a_dry_run_the_worker_checks_and_reports_storing_no_promptset(client, alice,
                                                                                            post_file):
    client.force_login(alice)
    rows = kimina_rows(2) + [{"statement_id": "x", "formal_statement": "def f := 1"}]
    response = post_file("validate", rows)
    assert response.status_code == 202, response.content
    assert (response.json()["state"], response.json()["dry_run"]) == ("pending", True)  # not read by the web process
    body = client.get(response.json()["status_url"]).json()
    assert (body["state"], body["is_finished"], body["promptset_id"]) == ("checked", True, None)
    assert (body["report"]["rows_accepted"], body["report"]["rows_rejected"]) == (2, 1)
    assert body["report"]["rejections"][0]["row"] == 3
    assert not Promptset.objects.exists()
    assert not Path(PromptsetUpload.objects.get().staged_path).exists()


def test_a_dry_run_may_carry_the_name_of_a_promptset_one_already_has(client, alice, post_file):
    client.force_login(alice)
    post_file("", kimina_rows(2))
    body = client.get(post_file("validate", kimina_rows(3)).json()["status_url"]).json()
    assert (body["state"], body["report"]["rows_accepted"]) == ("checked", 3)
    assert Promptset.objects.get().versions.get().problem_count == 2


def test_the_list_shows_own_and_public_promptsets_only(client, alice, charlie, post_file):
    client.force_login(alice)
    post_file("", kimina_rows(2))
    client.force_login(charlie)
    assert client.get("/api/promptsets/").json() == []
    assert client.get(f"/api/promptsets/{Promptset.objects.get().pk}").status_code == 404


def test_the_owner_curates_and_others_are_refused(client, alice, bob, post_file):
    client.force_login(alice)
    post_file("", kimina_rows(5), is_public="true")
    promptset = Promptset.objects.get()
    url = f"/api/promptsets/{promptset.pk}/versions/1/curate"
    response = client.post(url, {"kind": "split", "eval_fraction": 0.2}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert [v["number"] for v in response.json()] == [2, 3]
    assert client.post(url, {"kind": "sample"}, content_type="application/json").status_code == 422
    client.force_login(bob)
    assert client.post(url, {"kind": "sample", "count": 1}, content_type="application/json").status_code == 403
    assert PromptsetVersion.objects.count() == 3


def test_a_versions_problems_are_paged_and_searchable(client, alice, post_file):
    client.force_login(alice)
    post_file("", kimina_rows(5))
    promptset = Promptset.objects.get()
    problems = client.get(f"/api/promptsets/{promptset.pk}/versions/1/problems", {"limit": 2, "offset": 1}).json()
    assert [p["problem_key"] for p in problems] == ["kimina-1", "kimina-2"]
    found = client.get(f"/api/promptsets/{promptset.pk}/versions/1/problems", {"q": "n = 3"}).json()
    assert [p["problem_key"] for p in found] == ["kimina-3"]
