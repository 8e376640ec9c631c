"""A dataset, from the Hub or from a folder on the server, becomes a promptset the way an upload does: the
worker stages its split as JSON Lines, checks every row and imports all or nothing; each door (the page, the
API, the management command) calls the same action. No machine here reaches the Hub, so the datasets are
folders in the Hub's Parquet layout or written by save_to_disk; a Hub name is seen failing as offline."""

from __future__ import annotations

import pytest
from django.conf import settings as django_settings
from django.core.management import CommandError, call_command
from django.urls import reverse

from promptsets import uploads
from promptsets.models import Problem, Promptset, PromptsetUpload, PromptsetVersion
from tests.promptsets.conftest import kimina_rows, write_hub_layout, write_saved_dataset

pytestmark = pytest.mark.django_db


@pytest.fixture
def import_root(tmp_path, settings):
    root = tmp_path / "datasets"
    root.mkdir()
    settings.PROMPTSET_IMPORT_ROOTS = [root]
    return root


@pytest.fixture
def hub_layout(import_root):
    """A copy of a Hub dataset repository: one Parquet shard per split under data/."""
    return write_hub_layout(import_root / "Kimina-Prover-Promptset", {"train": [kimina_rows(5)], "test": [kimina_rows(2)]})


@pytest.fixture
def saved_to_disk(import_root):
    return write_saved_dataset(import_root / "saved", kimina_rows(4))


def post_import(client, checked_at_once, **fields):
    with checked_at_once():
        return client.post("/api/promptsets/imports", {"name": "kimina", **fields}, content_type="application/json")


def staged_files() -> list:
    folder = django_settings.ARTIFACTS_DIR / "uploads"
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


def test_a_hub_layout_folder_posted_on_the_upload_page_becomes_a_promptset_whose_problems_match(
        alices_client, alice, hub_layout, checked_at_once):
    before = staged_files()
    with checked_at_once():
        response = alices_client.post(reverse("promptsets:import"), {"hub-name": "kimina", "hub-folder": str(hub_layout),
                                                                    "hub-split": "train"})
    upload = PromptsetUpload.objects.get()
    assert response.status_code == 302 and response.url == upload.get_absolute_url()
    assert (upload.state, upload.source, upload.dataset["path"]) == ("imported", "folder", str(hub_layout))
    promptset = Promptset.objects.get(owner=alice, name="kimina")
    assert alices_client.get(response.url).url == promptset.get_absolute_url()
    expected = kimina_rows(5)
    rows = list(promptset.versions.get().trainer_rows())
    assert [row["problem_id"] for row in rows] == [row["statement_id"] for row in expected]
    assert rows[3]["formal_statement"] == expected[3]["formal_statement"].split("\n\n", 1)[1].removesuffix("\n  sorry")
    assert rows[3]["informal_statement"] == expected[3]["natural_language"]
    assert Problem.objects.get(problem_key="kimina-4").source_win_rate == 1.0
    assert upload.rows_read == 5 and upload.report["rows_accepted"] == 5
    assert staged_files() == before  # the staged JSON Lines went with the check


def test_a_save_to_disk_folder_imported_through_the_api_becomes_a_promptset(alices_client, saved_to_disk,
                                                                             checked_at_once):
    response = post_import(alices_client, checked_at_once, folder=str(saved_to_disk), is_public=True)
    assert response.status_code == 202, response.content
    assert (response.json()["state"], response.json()["source"]) == ("pending", "folder")
    status = alices_client.get(response.json()["status_url"]).json()
    assert status["state"] == "imported" and status["report"]["rows_accepted"] == 4
    promptset = Promptset.objects.get(pk=status["promptset_id"])
    assert promptset.is_public and promptset.versions.get().problem_count == 4


def test_the_dataset_is_staged_first_and_its_rows_counted_before_the_check(alices_client, hub_layout, checked_at_once,
                                                                           monkeypatch):
    seen = []
    real_stage = uploads.stage_dataset

    def stage_and_watch(source, destination, *, on_progress):
        def progress(rows):
            on_progress(rows)
            seen.append(PromptsetUpload.objects.values_list("state", "rows_read").get())
        return real_stage(source, destination, on_progress=progress, batch_rows=2)

    monkeypatch.setattr("promptsets.uploads.stage_dataset", stage_and_watch)
    post_import(alices_client, checked_at_once, folder=str(hub_layout))
    assert seen == [("staging", 2), ("staging", 4), ("staging", 5)]
    assert PromptsetUpload.objects.get().state == "imported"


def test_a_wrong_split_ends_the_upload_rejected_naming_the_splits_and_stores_nothing(
        alices_client, hub_layout, checked_at_once):
    before = staged_files()
    response = post_import(alices_client, checked_at_once, folder=str(hub_layout), split="validation")
    status = alices_client.get(response.json()["status_url"]).json()
    assert status["state"] == "rejected" and status["is_finished"]
    assert "Bad split: validation" in status["failure"] and "'train'" in status["failure"] and "'test'" in status["failure"]
    assert status["report"]["file_error"] == status["failure"]
    page = alices_client.get(reverse("promptsets:upload_status", args=[status["id"]])).content.decode()
    assert "Rejected: nothing was stored" in page and "Bad split: validation" in page
    assert not Promptset.objects.exists() and not PromptsetVersion.objects.exists()
    assert staged_files() == before


def test_a_hub_name_the_server_cannot_reach_ends_rejected_with_the_hubs_reason(alices_client, import_root,
                                                                               checked_at_once):
    response = post_import(alices_client, checked_at_once, dataset="AI-MO/NuminaMath-LEAN", revision="main")
    assert response.json()["source"] == "hub" and response.json()["dataset"]["name"] == "AI-MO/NuminaMath-LEAN"
    status = alices_client.get(response.json()["status_url"]).json()
    assert status["state"] == "rejected"
    assert status["failure"].startswith("AI-MO/NuminaMath-LEAN, split train, revision main: cannot be read")
    assert "Couldn't reach 'AI-MO/NuminaMath-LEAN' on the Hub" in status["failure"]
    assert not Promptset.objects.exists()


def test_a_folder_outside_the_roots_is_refused_at_once_and_nothing_is_queued(alices_client, hub_layout, tmp_path,
                                                                             checked_at_once, settings):
    elsewhere = tmp_path / "elsewhere"
    hub_layout.rename(elsewhere)
    response = post_import(alices_client, checked_at_once, folder=str(elsewhere))
    assert response.status_code == 422 and "is not under a folder the server may read" in response.json()["detail"]
    response = post_import(alices_client, checked_at_once, folder="/etc")
    assert response.status_code == 422 and "PROMPTSET_IMPORT_ROOTS" in response.json()["detail"]
    settings.PROMPTSET_IMPORT_ROOTS = []
    response = post_import(alices_client, checked_at_once, folder=str(elsewhere))
    assert response.status_code == 422
    assert "importing from a folder on the server is off" in response.json()["detail"]
    assert "PROMPTSET_IMPORT_ROOTS setting, which is empty" in response.json()["detail"]
    assert not PromptsetUpload.objects.exists()


def test_the_upload_page_offers_the_hub_form_and_says_its_refusals_there(alices_client, hub_layout):
    page = alices_client.get(reverse("promptsets:upload")).content.decode()
    assert "From the Hugging Face Hub" in page and 'id="promptset-import-form"' in page
    assert 'name="hub-dataset"' in page and 'name="hub-split"' in page and 'name="hub-revision"' in page
    assert 'id="promptset-upload-form"' in page  # the file form is still there, beside it
    response = alices_client.post(reverse("promptsets:import"), {"hub-name": "x", "hub-dataset": "gpt2", "hub-split": "train"})
    assert response.status_code == 200 and "give it as owner/name" in response.content.decode()
    response = alices_client.post(reverse("promptsets:import"), {"hub-name": "x", "hub-folder": "/etc", "hub-split": "train"})
    assert "is not under a folder the server may read" in response.content.decode()
    response = alices_client.post(reverse("promptsets:import"), {"hub-name": "x", "hub-split": "train"})
    assert "give a dataset name" in response.content.decode()
    assert not PromptsetUpload.objects.exists()


def test_the_import_api_refuses_unknown_fields_and_bad_names_by_name(alices_client, checked_at_once):
    response = post_import(alices_client, checked_at_once, dataset="AI-MO/NuminaMath-LEAN", splitt="test")
    assert response.status_code == 422 and "splitt" in str(response.json()["detail"])
    response = post_import(alices_client, checked_at_once, dataset="../../etc/passwd")
    assert response.status_code == 422 and "is not a dataset name" in response.json()["detail"]
    response = post_import(alices_client, checked_at_once, dataset="AI-MO/NuminaMath-LEAN", folder="/srv/x")
    assert response.status_code == 422 and "not both" in response.json()["detail"]
    assert not PromptsetUpload.objects.exists()


def test_a_name_already_taken_is_refused_at_once(alices_client, saved_to_disk, checked_at_once):
    post_import(alices_client, checked_at_once, folder=str(saved_to_disk))
    response = post_import(alices_client, checked_at_once, folder=str(saved_to_disk))
    assert response.status_code == 409 and "already have a promptset named 'kimina'" in response.json()["detail"]


def test_another_person_cannot_see_an_import_or_its_status(client, alice, charlie, saved_to_disk, checked_at_once):
    client.force_login(alice)
    status_url = post_import(client, checked_at_once, folder=str(saved_to_disk)).json()["status_url"]
    upload = PromptsetUpload.objects.get()
    client.force_login(charlie)
    assert client.get(status_url).status_code == 404
    assert client.get(reverse("promptsets:upload_status", args=[upload.pk])).status_code == 404


def test_the_management_command_imports_a_folder_through_the_same_action(alice, hub_layout, capsys):
    call_command("import_hub_promptset", "--folder", str(hub_layout), "--owner", "alice", "--name", "cmd",
                 "--split", "test")
    assert "Imported promptset" in capsys.readouterr().out
    assert Promptset.objects.get(name="cmd").versions.get().problem_count == 2
    assert PromptsetUpload.objects.get().state == "imported"
    with pytest.raises(CommandError, match="not under a folder the server may read"):
        call_command("import_hub_promptset", "--folder", "/etc", "--owner", "alice", "--name", "etc")
    with pytest.raises(CommandError, match="Bad split: dev"):
        call_command("import_hub_promptset", "--folder", str(hub_layout), "--owner", "alice", "--name", "dev",
                     "--split", "dev")
    assert list(Promptset.objects.values_list("name", flat=True)) == ["cmd"]
