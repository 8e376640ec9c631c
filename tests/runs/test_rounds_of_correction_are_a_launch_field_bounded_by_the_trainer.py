"""``max_rounds`` (the trainer's ``retry.max_rounds``) is a launch field of the form, the API and the CLI alike, from 1
(the release's one retry) to the trainer's own limit; out of range is refused on the field, saying the range."""

import pytest
from django.urls import reverse

from runs.launch_contract import bounds
from runs.models import Run
from trainer.config import MAX_ROUNDS_OF_CORRECTION

pytestmark = pytest.mark.django_db


def api_launch(client, version, **fields):
    return client.post("/api/runs/", {"name": "rounds", "promptset_version_id": version.pk, "preset": "cpu-smoke",
                                      **fields}, content_type="application/json")


def test_every_preset_bounds_it_from_one_to_the_trainers_limit():
    assert {preset: bounds(preset)["max_rounds"].describe() for preset in ("cpu-smoke", "cpu-demo", "h100x8")} == {
        preset: f"1 to {MAX_ROUNDS_OF_CORRECTION}" for preset in ("cpu-smoke", "cpu-demo", "h100x8")}


def test_the_api_launches_a_run_with_three_rounds_into_its_retry_section(alices_client, promptset_version, dispatched):
    response = api_launch(alices_client, promptset_version, max_rounds=3)
    assert response.status_code == 201, response.json()
    assert Run.objects.get().config["retry"]["max_rounds"] == 3


def test_a_run_that_does_not_say_keeps_the_releases_one_retry(alices_client, promptset_version, dispatched):
    assert api_launch(alices_client, promptset_version).status_code == 201
    assert Run.objects.get().config["retry"]["max_rounds"] == 1


def test_the_api_and_the_form_refuse_too_many_rounds_on_the_field(alices_client, promptset_version, dispatched):
    response = api_launch(alices_client, promptset_version, max_rounds=MAX_ROUNDS_OF_CORRECTION + 1)
    assert response.status_code == 422
    assert response.json()["field_errors"] == {"max_rounds": [
        f"must be from 1 to {MAX_ROUNDS_OF_CORRECTION} for the cpu-smoke preset (got {MAX_ROUNDS_OF_CORRECTION + 1})"]}
    response = alices_client.post(reverse("runs:new"), {
        "name": "rounds", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "rl", "max_rounds": 0})
    assert response.status_code == 200 and response.context["form"].errors["max_rounds"]
    assert Run.objects.count() == 0 and dispatched == []
