"""``temperature`` (the trainer's ``rollout.temperature``) is a launch field of the form and the API alike: from 0.1 to
2 on every preset, the preset's value shown, and what a person sets reaches the config the trainer reads."""

import pytest
from django.urls import reverse

from runs.launch_contract import bounds
from runs.models import Run
from tests.runs.launch_helpers import trainers_config

pytestmark = pytest.mark.django_db


def test_every_preset_bounds_it_from_a_tenth_to_two():
    assert {preset: bounds(preset)["temperature"].describe() for preset in ("cpu-smoke", "cpu-demo", "h100x8")} == {
        preset: "0.1 to 2" for preset in ("cpu-smoke", "cpu-demo", "h100x8")}


def test_a_run_launched_from_the_form_at_0_3_reaches_the_trainers_config(
        alices_client, promptset_version, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alices_client.post(reverse("runs:new"), {
            "name": "cool", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "rl",
            "temperature": "0.3", "lean_tool_calls": 2, "max_response_tokens": 160})
    assert response.status_code == 302, response.context["form"].errors
    rollout = trainers_config(Run.objects.get()).rollout
    assert (rollout.temperature, rollout.lean_tool_calls, rollout.max_response_tokens) == (0.3, 2, 160)


def test_the_form_shows_it_among_the_sampling_fields_with_the_presets_value(alices_client):
    form = alices_client.get(reverse("runs:new")).context["form"]
    sampling = next(group for group in form.groups() if group["title"] == "Sampling")
    assert "temperature" in [bound.name for bound, _ in sampling["fields"]]
    assert form.fields["temperature"].initial == "1"  # the preset's value, as the page writes it
    assert (form.fields["temperature"].widget.attrs["min"], form.fields["temperature"].widget.attrs["max"]) == (
        "0.1", "2")


@pytest.mark.parametrize("temperature", [0, 2.5])
def test_greedy_or_too_hot_is_a_field_error_and_nothing_is_stored(alices_client, promptset_version, dispatched,
                                                                   temperature):
    response = alices_client.post("/api/runs/", {"name": "cool", "promptset_version_id": promptset_version.pk,
                                                 "preset": "cpu-smoke", "temperature": temperature},
                                  content_type="application/json")
    assert response.status_code == 422, response.content
    assert "temperature" in response.content.decode() and "0.1 to 2" in response.content.decode()
    assert not Run.objects.exists()
