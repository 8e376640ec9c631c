"""``lean_tool_calls`` (the trainer's ``rollout.lean_tool_calls``, K) and ``retry_history`` (``retry.history``) are
launch fields of the form and the API alike: K from 0 to the trainer's own limit for every preset, the history one of
the trainer's choices, each with a help text, and what a person sets reaches the config the trainer reads."""

import pytest
from django.urls import reverse

from runs.launch_contract import LaunchRequest, bounds
from runs.models import Run
from tests.runs.launch_helpers import trainers_config
from trainer.config import MAX_LEAN_TOOL_CALLS

pytestmark = pytest.mark.django_db


def form_launch(client, version, **fields):
    return client.post(reverse("runs:new"), {"name": "tools", "promptset_version": version.pk, "preset": "cpu-smoke",
                                             "kind": "rl", **fields})


def test_every_preset_bounds_k_from_zero_to_the_trainers_limit():
    assert {preset: bounds(preset)["lean_tool_calls"].describe() for preset in ("cpu-smoke", "cpu-demo", "h100x8")} == {
        preset: f"0 to {MAX_LEAN_TOOL_CALLS}" for preset in ("cpu-smoke", "cpu-demo", "h100x8")}


def test_a_run_launched_from_the_form_with_k_2_reaches_the_trainers_config(
        alices_client, promptset_version, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = form_launch(alices_client, promptset_version, lean_tool_calls=2)
    assert response.status_code == 302, response.context["form"].errors
    assert trainers_config(Run.objects.get()).rollout.lean_tool_calls == 2


def test_a_run_launched_from_the_form_with_three_rounds_carrying_all_history_reaches_the_trainers_config(
        alices_client, promptset_version, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = form_launch(alices_client, promptset_version, max_rounds=3, retry_history="all")
    assert response.status_code == 302, response.context["form"].errors
    config = trainers_config(Run.objects.get())
    assert (config.retry.max_rounds, config.retry.history.value) == (3, "all")


def test_the_api_launches_with_k_and_the_history_and_blank_keeps_the_releases(alices_client, promptset_version,
                                                                             dispatched):
    for fields in ({"lean_tool_calls": 3, "retry_history": "all"}, {}):
        response = alices_client.post("/api/runs/", {"name": "tools", "promptset_version_id": promptset_version.pk,
                                                     "preset": "cpu-smoke", **fields}, content_type="application/json")
        assert response.status_code == 201, response.json()
    assert [(run.config["rollout"]["lean_tool_calls"], run.config["retry"]["history"])
            for run in Run.objects.order_by("pk")] == [(3, "all"), (0, "last")]


def test_the_form_offers_both_with_a_help_text_in_the_beyond_the_release_group(alices_client):
    page = alices_client.get(reverse("runs:new"))
    form = page.context["form"]
    assert [choice for choice, _ in form.fields["retry_history"].choices] == ["", "last", "all"]
    assert form.fields["retry_history"].choices[0][1] == "the preset's (last)"
    assert "Lean checks an answer may ask for" in form.fields["lean_tool_calls"].help_text
    assert form.fields["lean_tool_calls"].widget.attrs["max"] == str(MAX_LEAN_TOOL_CALLS)
    beyond = next(group for group in form.groups() if group["title"] == "Beyond the release")
    assert [bound.name for bound, _ in beyond["fields"]][:3] == ["max_rounds", "retry_history", "lean_tool_calls"]
    assert 'name="lean_tool_calls"' in page.content.decode() and 'name="retry_history"' in page.content.decode()
    assert LaunchRequest.model_fields["retry_history"].description


def test_out_of_range_k_and_an_unknown_history_are_field_errors_and_nothing_is_stored(
        alices_client, promptset_version, dispatched):
    response = alices_client.post("/api/runs/", {
        "name": "tools", "promptset_version_id": promptset_version.pk, "preset": "cpu-smoke",
        "lean_tool_calls": MAX_LEAN_TOOL_CALLS + 1}, content_type="application/json")
    assert response.status_code == 422
    assert response.json()["field_errors"] == {"lean_tool_calls": [
        f"must be from 0 to {MAX_LEAN_TOOL_CALLS} for the cpu-smoke preset (got {MAX_LEAN_TOOL_CALLS + 1})"]}
    form = form_launch(alices_client, promptset_version, retry_history="everything").context["form"]
    assert "retry_history" in form.errors
    assert Run.objects.count() == 0 and dispatched == []
