"""Uploading through the form: one transaction, the rejected rows on the form, nothing left on failure."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from promptsets.models import Problem, Promptset, PromptsetUpload, PromptsetVersion
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db


@pytest.fixture
def upload(checked_at_once):
    """Post the form; a staged upload is checked (as the worker would) and its page followed."""

    def post(client, rows_or_bytes, filename="kimina.jsonl", **fields):
        data = rows_or_bytes if isinstance(rows_or_bytes, bytes) else encode(rows_or_bytes, filename.rsplit(".", 1)[1])
        form = {"name": "kimina", "file": SimpleUploadedFile(filename, data)}
        form.update(fields)
        with checked_at_once():
            response = client.post(reverse("promptsets:upload"), form)
        if response.status_code == 302:
            return client.get(response.url, follow=True)
        return response

    return post


@pytest.mark.parametrize("file_format", ["jsonl", "json", "parquet", "csv"])
def test_a_valid_file_creates_the_promptset_its_problems_and_version_1(alices_client, alice, file_format, upload):
    response = upload(alices_client, kimina_rows(5), filename=f"kimina.{file_format}")
    promptset = Promptset.objects.get(owner=alice, name="kimina")
    assert response.redirect_chain[-1][0] == reverse("promptsets:detail", args=[promptset.pk])
    assert PromptsetUpload.objects.get().state == "imported"
    version = promptset.versions.get()
    assert (version.number, version.problem_count, version.parent) == (1, 5, None)
    assert version.rule["kind"] == "upload" and version.rule["file_format"] == file_format
    rows = list(version.trainer_rows())
    assert [row["problem_id"] for row in rows] == [f"kimina-{i}" for i in range(5)]
    assert rows[0]["formal_statement"] == "theorem sum_0 (n : ℕ) (h : n = 0) : n + 1 = 1 := by"
    assert Problem.objects.get(problem_key="kimina-4").source_win_rate == 1.0


def test_one_invalid_row_rejects_the_whole_upload_and_the_form_lists_it(alices_client, upload):
    rows = kimina_rows(3)
    rows[2]["formal_statement"] = "theorem t : 1 = 1 := by\n  rfl"
    response = upload(alices_client, rows)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Rejected: nothing was stored" in page
    assert "1 of 3 rows were rejected, so nothing was imported" in page
    assert "a proof follows" in page and "kimina-2" in page
    assert not Promptset.objects.exists() and not Problem.objects.exists() and not PromptsetVersion.objects.exists()


def test_skipping_invalid_rows_imports_the_rest_and_remembers_what_was_skipped(alices_client, upload):
    rows = kimina_rows(3)
    rows[1]["formal_statement"] = "#eval 1\ntheorem t : True := by"
    upload(alices_client, rows, skip_invalid_rows="on")
    version = PromptsetVersion.objects.get()
    assert version.problem_count == 2
    assert version.rule["rows_skipped"] == 1 and version.rule["skipped_rows"][0]["row"] == 2


def test_an_unreadable_file_is_reported_and_leaves_nothing(alices_client, upload):
    data = encode(kimina_rows(4), "parquet")
    response = upload(alices_client, data[:-50], filename="cut.parquet")
    assert "cannot be read" in response.content.decode()
    assert not Promptset.objects.exists()


def test_the_column_mapping_fields_reach_the_parser(alices_client, upload):
    rows = [{"lean": "theorem t : 1 + 1 = 2 := by", "ident": "p-1"}]
    upload(alices_client, rows, filename="custom.jsonl", formal_statement_column="lean", problem_key_column="ident")
    assert Problem.objects.get().problem_key == "p-1"


def test_a_name_already_used_by_the_same_person_is_a_form_error(alices_client, alice, upload):
    upload(alices_client, kimina_rows(2))
    response = upload(alices_client, kimina_rows(2))
    assert "already have a promptset named" in response.content.decode()
    assert Promptset.objects.filter(owner=alice).count() == 1


def test_the_upload_page_loads_the_progress_script(alices_client, upload):
    page = alices_client.get(reverse("promptsets:upload")).content.decode()
    assert "promptsets-upload.js" in page and 'id="upload-progress"' in page
    assert 'name="skip_invalid_rows"' in page and 'name="formal_statement_column"' in page


def test_a_stranger_must_sign_in_first(client):
    response = client.get(reverse("promptsets:upload"))
    assert response.status_code == 302 and "login" in response.url


def test_rows_without_imports_get_the_header_typed_in_the_form(alices_client, upload):
    rows = [{"name": "bare", "formal_statement": "theorem bare : 1 + 1 = 2 := by"}]
    upload(alices_client, rows, filename="bare.jsonl", default_header="import Mathlib\nopen Real")
    assert Problem.objects.get().header == "import Mathlib\nopen Real"
    upload(alices_client, rows, filename="bare.jsonl", name="no header", default_header="")
    assert Problem.objects.get(promptset__name="no header").header == ""


def test_a_statement_limit_outside_its_range_names_the_range(alices_client, upload):
    response = upload(alices_client, kimina_rows(1), max_statement_chars=5)
    assert "Ensure this value is greater than or equal to 100" in response.content.decode()
    assert not Promptset.objects.exists()
