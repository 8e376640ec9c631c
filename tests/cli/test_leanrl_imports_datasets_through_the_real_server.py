"""A dataset imported through the real server (web process, Celery worker, PostgreSQL, Redis): by the API and
by ``leanrl promptsets import``, which follows the worker as it stages and checks. The datasets are folders
under the test processes' PROMPTSET_IMPORT_ROOTS (no machine here reaches the Hub; a Hub name fails offline)."""

from __future__ import annotations

import time
import uuid

import httpx
import pytest
from django.conf import settings

from promptsets.models import Promptset, PromptsetUpload
from tests.promptsets.conftest import kimina_rows, write_hub_layout, write_saved_dataset

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def dataset_folder():
    """A fresh folder under the root the platform's processes were started with."""
    folder = settings.PROMPTSET_IMPORT_ROOTS[0] / uuid.uuid4().hex
    folder.mkdir(parents=True)
    return folder


def test_the_api_imports_a_folder_through_the_worker_and_only_its_owner_follows_it(
        alice, charlie, platform_processes, platform_logs, dataset_folder):
    from accounts.models import ApiToken, TokenScope

    _, alices = ApiToken.issue(alice, "import", scope=TokenScope.LAUNCH)
    _, charlies = ApiToken.issue(charlie, "nosy", scope=TokenScope.READ)
    folder = write_hub_layout(dataset_folder, {"train": [kimina_rows(6)]})
    with httpx.Client(base_url=platform_processes["url"], timeout=30) as http:
        response = http.post("/api/promptsets/imports", headers={"Authorization": f"Bearer {alices}"},
                             json={"name": "kimina over http", "folder": str(folder), "split": "train"})
        assert response.status_code == 202, response.text
        status_url = response.json()["status_url"]
        deadline = time.monotonic() + 120
        while not (status := http.get(status_url, headers={"Authorization": f"Bearer {alices}"}).json())["is_finished"]:
            assert time.monotonic() < deadline, f"the import did not finish: {status}\n{platform_logs()}"
            time.sleep(0.3)
        assert status["state"] == "imported", f"{status}\n{platform_logs()}"
        assert http.get(status_url, headers={"Authorization": f"Bearer {charlies}"}).status_code == 404
    promptset = Promptset.objects.get(pk=status["promptset_id"])
    assert [row["problem_id"] for row in promptset.versions.get().trainer_rows()] == [f"kimina-{i}" for i in range(6)]
    assert PromptsetUpload.objects.get(pk=status["id"]).peak_memory_bytes  # checked in the capped child, as files are


def test_leanrl_imports_a_save_to_disk_folder_and_says_why_when_it_cannot(
        alice, platform_processes, leanrl, dataset_folder):
    from accounts.models import ApiToken, TokenScope

    _, token = ApiToken.issue(alice, "terminal", scope=TokenScope.LAUNCH)
    assert leanrl("login", "--server", platform_processes["url"], "--token", token).returncode == 0
    write_saved_dataset(dataset_folder, kimina_rows(4))

    imported = leanrl("promptsets", "import", "--folder", str(dataset_folder), "--name", "saved-cli")
    assert imported.returncode == 0, imported.stderr
    assert "'saved-cli': version 1" in imported.stdout and "with 4 problems; 0 rows rejected" in imported.stdout

    wrong_split = leanrl("promptsets", "import", "--folder", str(dataset_folder), "--split", "test", "--name", "x")
    assert wrong_split.returncode == 3 and "has no split 'test'; it has train" in wrong_split.stderr
    offline = leanrl("promptsets", "import", "--dataset", "AI-MO/NuminaMath-LEAN", "--name", "y")
    assert offline.returncode == 3 and "Couldn't reach 'AI-MO/NuminaMath-LEAN' on the Hub" in offline.stderr
    outside = leanrl("promptsets", "import", "--folder", "/etc", "--name", "z")
    assert outside.returncode == 3 and "is not under a folder the server may read" in outside.stderr
    both = leanrl("promptsets", "import", "--folder", "/etc", "--dataset", "a/b", "--name", "z")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
    for result in (wrong_split, offline, outside, both):
        assert "Traceback" not in result.stderr
    assert list(Promptset.objects.filter(owner=alice).values_list("name", flat=True)) == ["saved-cli"]
