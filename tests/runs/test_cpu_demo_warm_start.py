"""cpu-demo runs start from the warm-started SmolLM2 the stack builds; until it is ready, the form says so."""

import json

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dispatched")]


@pytest.fixture
def warm_start_paths(settings, tmp_path):
    settings.WARM_START_MODEL = str(tmp_path / "model")
    settings.WARM_START_STATUS = str(tmp_path / "status.json")
    return tmp_path


def launch(client, version, preset="cpu-demo"):
    return client.post(reverse("runs:new"), {"name": "demo", "promptset_version": version.pk, "preset": preset,
                                             "kind": "rl"})


def test_a_cpu_demo_run_starts_from_the_warm_start_once_it_is_built(alices_client, promptset_version, warm_start_paths):
    (warm_start_paths / "model").mkdir()
    (warm_start_paths / "model" / "config.json").write_text("{}")
    assert launch(alices_client, promptset_version).status_code == 302
    assert Run.objects.get().config["model"]["init_checkpoint"] == str(warm_start_paths / "model")


def test_while_it_is_building_the_form_says_how_far_and_stores_nothing(alices_client, promptset_version, warm_start_paths):
    (warm_start_paths / "status.json").write_text(json.dumps({"state": "building", "step": 3, "total_steps": 12}))
    page = launch(alices_client, promptset_version).content.decode()
    assert "which is building (step 3 of 12)" in page
    assert Run.objects.count() == 0


def test_other_presets_do_not_wait_for_it(alices_client, promptset_version, warm_start_paths):
    assert launch(alices_client, promptset_version, preset="cpu-smoke").status_code == 302
    assert Run.objects.get().config["model"]["init_checkpoint"] is None


def test_without_the_embedded_stack_cpu_demo_uses_the_presets_model(alices_client, promptset_version, settings):
    settings.WARM_START_MODEL = None
    assert launch(alices_client, promptset_version).status_code == 302
    assert Run.objects.get().config["model"]["init_checkpoint"] is None
