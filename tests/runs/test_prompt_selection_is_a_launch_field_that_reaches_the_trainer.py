"""``data_selection`` (the trainer's ``data.selection``, issue 47) is a launch field of the form and the API alike:
one of the trainer's choices, blank for the preset's (uniform, the release's), with a help text, and what a person
chooses reaches the config the trainer reads."""

import pytest
from django.urls import reverse

from runs.launch_contract import LaunchRequest
from runs.models import Run
from tests.runs.launch_helpers import trainers_config

pytestmark = pytest.mark.django_db


def test_a_run_launched_from_the_form_with_history_selection_reaches_the_trainers_config(
        alices_client, promptset_version, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alices_client.post(reverse("runs:new"), {
            "name": "selective", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "rl",
            "data_selection": "history"})
    assert response.status_code == 302, response.context["form"].errors
    assert trainers_config(Run.objects.get()).data.selection.value == "history"


def test_the_api_launches_with_history_and_blank_keeps_the_releases_uniform(alices_client, promptset_version,
                                                                           dispatched):
    for fields in ({"data_selection": "history"}, {}):
        response = alices_client.post("/api/runs/", {"name": "selective", "promptset_version_id": promptset_version.pk,
                                                     "preset": "cpu-smoke", **fields}, content_type="application/json")
        assert response.status_code == 201, response.json()
    assert [run.config["data"]["selection"] for run in Run.objects.order_by("pk")] == ["history", "uniform"]


def test_the_form_offers_it_with_the_presets_choice_and_a_help_text_beyond_the_release(alices_client):
    page = alices_client.get(reverse("runs:new"))
    form = page.context["form"]
    assert [choice for choice, _ in form.fields["data_selection"].choices] == ["", "uniform", "history"]
    assert form.fields["data_selection"].choices[0][1] == "the preset's (uniform)"
    assert "skipped before generation" in form.fields["data_selection"].help_text
    beyond = next(group for group in form.groups() if group["title"] == "Beyond the release")
    assert "data_selection" in [bound.name for bound, _ in beyond["fields"]]
    assert 'name="data_selection"' in page.content.decode()
    assert LaunchRequest.model_fields["data_selection"].description


def test_an_unknown_selection_is_a_field_error_and_nothing_is_stored(alices_client, promptset_version, dispatched):
    response = alices_client.post("/api/runs/", {"name": "selective", "promptset_version_id": promptset_version.pk,
                                                 "preset": "cpu-smoke", "data_selection": "greedy"},
                                  content_type="application/json")
    assert response.status_code == 422
    assert "data_selection" in response.json()["field_errors"]
    form = alices_client.post(reverse("runs:new"), {"name": "x", "promptset_version": promptset_version.pk,
                                                    "preset": "cpu-smoke", "kind": "rl",
                                                    "data_selection": "greedy"}).context["form"]
    assert "data_selection" in form.errors
    assert Run.objects.count() == 0 and dispatched == []
