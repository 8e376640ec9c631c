"""Launching a run from the form: the trainer's schema judges it, bad input is explained, nothing half-stored."""

import pytest
from django.urls import reverse

from runs.models import Run, RunState

pytestmark = pytest.mark.django_db


def form_data(version, **overrides):
    data = {"name": "demo run", "promptset_version": version.pk, "preset": "cpu-demo", "kind": "rl"}
    data.update(overrides)
    return data


def test_a_valid_form_stores_a_queued_run_with_its_resolved_config(alices_client, promptset_version, dispatched,
                                                                  django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = alices_client.post(reverse("runs:new"), form_data(promptset_version, total_steps=3))
    run = Run.objects.get()
    assert response.status_code == 302 and response.url == run.get_absolute_url()
    assert run.state == RunState.QUEUED and run.owner.username == "alice"
    assert run.config["schedule"]["total_steps"] == 3
    assert (run.config["rollout"]["engine"], run.config["rollout"]["engine_fallback"]) == ("vllm", "transformers")
    assert dispatched == [run.pk] and run.attempt == 1


def test_a_rule_across_fields_is_reported_and_nothing_is_stored(alices_client, promptset_version, dispatched):
    response = alices_client.post(reverse("runs:new"), form_data(promptset_version, prompts_per_step=3))
    assert response.status_code == 200
    text = response.content.decode()
    assert "must be a multiple of" in text and "mini_batch_prompts" in text
    assert Run.objects.count() == 0 and dispatched == []


@pytest.mark.parametrize("field, value, message", [
    ("total_steps", "0", "must be from 1 to 500 for the cpu-demo preset (got 0)"),
    ("learning_rate", "fast", "Enter a number"),
    ("preset", "h200x16", "Select a valid choice"),
    ("name", "", "This field is required"),
])
def test_bad_values_are_named_with_what_is_allowed(alices_client, promptset_version, dispatched, field, value, message):
    response = alices_client.post(reverse("runs:new"), form_data(promptset_version, **{field: value}))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert Run.objects.count() == 0


def test_someone_elses_private_promptset_cannot_be_chosen(client, charlie, promptset_version, dispatched):
    client.force_login(charlie)
    response = client.post(reverse("runs:new"), form_data(promptset_version))
    assert "Select a valid choice" in response.content.decode()
    assert Run.objects.count() == 0


def test_only_the_owner_may_cancel(client, make_run, bob):
    run = make_run(state="running")
    run.shared_with.add(bob)
    client.force_login(bob)
    assert client.post(reverse("runs:cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert run.state == RunState.RUNNING


def test_a_stranger_cannot_tell_a_private_run_exists(client, make_run, charlie):
    run = make_run()
    client.force_login(charlie)
    assert client.get(reverse("runs:detail", args=[run.pk])).status_code == 404


def test_the_run_page_shows_the_failure_reason(client, make_run, alice):
    run = make_run(state="running")
    run.mark_failed("the Ray job failed: out of memory")
    client.force_login(alice)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "the Ray job failed: out of memory" in page


def test_the_api_launches_with_the_same_rules(alices_client, promptset_version, dispatched):
    response = alices_client.post("/api/runs/", {"name": "api run", "promptset_version_id": promptset_version.pk,
                                                  "preset": "cpu-demo", "samples_per_prompt": 0},
                                  content_type="application/json")
    assert response.status_code == 422
    assert "samples_per_prompt" in response.json()["field_errors"]
    assert Run.objects.count() == 0


def test_an_rl_run_can_start_from_an_sft_checkpoint_and_records_that_lineage(
        alices_client, make_run, promptset_version, dispatched):
    sft_run = make_run(state="succeeded", kind="sft", name="warm start")
    checkpoint = sft_run.checkpoints.create(step=12, path="/data/artifacts/runs/1/checkpoints/step_000012")
    response = alices_client.post(reverse("runs:new"), form_data(
        promptset_version, name="rl after sft", kind="rl", starting_checkpoint=checkpoint.pk))
    assert response.status_code == 302
    run = Run.objects.get(name="rl after sft")
    assert run.starting_checkpoint == checkpoint
    assert run.config["model"]["init_checkpoint"] == "/data/artifacts/runs/1/checkpoints/step_000012/model"


def test_an_sft_run_is_launched_from_the_same_form(alices_client, promptset_version, dispatched):
    alices_client.post(reverse("runs:new"), form_data(promptset_version, kind="sft"))
    assert Run.objects.get().kind == "sft"


def test_a_checkpoint_of_someone_elses_run_cannot_be_chosen(client, charlie, make_run, promptset_version, dispatched):
    checkpoint = make_run(state="succeeded").checkpoints.create(step=1, path="/x")
    client.force_login(charlie)
    response = client.post(reverse("runs:new"), form_data(promptset_version, starting_checkpoint=checkpoint.pk))
    assert "Select a valid choice" in response.content.decode()


def test_the_run_page_links_to_the_run_it_started_from(client, alice, make_run):
    sft_run = make_run(state="succeeded", kind="sft", name="warm start")
    checkpoint = sft_run.checkpoints.create(step=12, path="/x")
    run = make_run(name="rl", starting_checkpoint=checkpoint)
    client.force_login(alice)
    page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert f'href="{sft_run.get_absolute_url()}">warm start · step 12</a>' in page
