"""The API imports, validates, lists and curates with the same rules as the pages."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from promptsets.models import Promptset, PromptsetVersion
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db


def post_file(client, path, rows, filename="k.jsonl", **fields):
    data = rows if isinstance(rows, bytes) else encode(rows, filename.rsplit(".", 1)[1])
    return client.post(f"/api/promptsets/{path}", {"name": "api set", "file": SimpleUploadedFile(filename, data), **fields})


def test_an_upload_returns_201_with_the_promptset_and_its_report(client, alice):
    client.force_login(alice)
    response = post_file(client, "", kimina_rows(4), filename="k.parquet")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["promptset"]["versions"][0]["number"] == 1 and body["report"]["rows_accepted"] == 4
    assert Promptset.objects.get().owner == alice


def test_a_rejected_upload_returns_422_listing_every_rejected_row_and_stores_nothing(client, alice):
    client.force_login(alice)
    rows = kimina_rows(3)
    rows[0]["formal_statement"] = rows[2]["formal_statement"] = "example : True := by trivial"
    response = post_file(client, "", rows)
    assert response.status_code == 422
    assert [r["row"] for r in response.json()["report"]["rejections"]] == [1, 3]
    assert not Promptset.objects.exists()


def test_the_validate_endpoint_reports_without_storing(client, alice):
    client.force_login(alice)
    rows = kimina_rows(2) + [{"statement_id": "x", "formal_statement": "def f := 1"}]
    response = post_file(client, "validate", rows)
    assert response.status_code == 200
    assert (response.json()["rows_accepted"], response.json()["rows_rejected"]) == (2, 1)
    assert not Promptset.objects.exists()


def test_the_list_shows_own_and_public_promptsets_only(client, alice, charlie):
    client.force_login(alice)
    post_file(client, "", kimina_rows(2))
    client.force_login(charlie)
    assert client.get("/api/promptsets/").json() == []
    assert client.get(f"/api/promptsets/{Promptset.objects.get().pk}").status_code == 404


def test_the_owner_curates_and_others_are_refused(client, alice, bob):
    client.force_login(alice)
    post_file(client, "", kimina_rows(5), is_public="true")
    promptset = Promptset.objects.get()
    url = f"/api/promptsets/{promptset.pk}/versions/1/curate"
    response = client.post(url, {"kind": "split", "eval_fraction": 0.2}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert [v["number"] for v in response.json()] == [2, 3]
    assert client.post(url, {"kind": "sample"}, content_type="application/json").status_code == 422
    client.force_login(bob)
    assert client.post(url, {"kind": "sample", "count": 1}, content_type="application/json").status_code == 403
    assert PromptsetVersion.objects.count() == 3


def test_a_versions_problems_are_paged_and_searchable(client, alice):
    client.force_login(alice)
    post_file(client, "", kimina_rows(5))
    promptset = Promptset.objects.get()
    problems = client.get(f"/api/promptsets/{promptset.pk}/versions/1/problems", {"limit": 2, "offset": 1}).json()
    assert [p["problem_key"] for p in problems] == ["kimina-1", "kimina-2"]
    found = client.get(f"/api/promptsets/{promptset.pk}/versions/1/problems", {"q": "n = 3"}).json()
    assert [p["problem_key"] for p in found] == ["kimina-3"]
