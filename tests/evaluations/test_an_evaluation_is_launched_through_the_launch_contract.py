"""An evaluation is a run of kind eval, launched through the one launch contract: a registry model or a
checkpoint one may see, k within the preset's bounds, error correction on or off; nothing trains."""

import pytest

from runs import ray_jobs
from runs.models import Run

pytestmark = pytest.mark.django_db


def launch(client, version, **fields):
    body = {"kind": "eval", "name": "eval", "promptset_version_id": version.pk, "preset": "cpu-smoke", **fields}
    return client.post("/api/runs/", body, content_type="application/json")


def test_an_eval_run_is_stored_with_its_samples_and_error_correction_and_runs_the_evaluate_command(
        alices_client, promptset_version, dispatched, settings):
    response = launch(alices_client, promptset_version, eval_samples=4, error_correction=False)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.kind == "eval"
    assert run.resolved_config.schedule.eval_samples == 4
    assert run.resolved_config.schedule.eval_error_correction is False
    assert " -m trainer evaluate " in ray_jobs.trainer_entrypoint(run)


def test_error_correction_is_on_unless_switched_off(alices_client, promptset_version, dispatched):
    response = launch(alices_client, promptset_version, eval_samples=2)
    assert Run.objects.get(pk=response.json()["id"]).resolved_config.schedule.eval_error_correction is True


def test_a_k_out_of_the_presets_bounds_is_a_422_naming_the_field(alices_client, promptset_version, dispatched):
    response = launch(alices_client, promptset_version, eval_samples=64)
    assert response.status_code == 422
    assert "cpu-smoke" in response.json()["field_errors"]["eval_samples"][0]
    assert not Run.objects.exists()


def test_a_checkpoint_one_may_not_see_is_a_404_whether_or_not_it_exists(
        client, charlie, make_run, promptset_version, dispatched):
    promptset_version.promptset.is_public = True
    promptset_version.promptset.save()
    checkpoint = make_run(state="succeeded").checkpoints.create(step=1, path="/x")
    client.force_login(charlie)
    hidden = launch(client, promptset_version, starting_checkpoint_id=checkpoint.pk)
    missing = launch(client, promptset_version, starting_checkpoint_id=checkpoint.pk + 1000)
    assert hidden.status_code == missing.status_code == 404
    assert not Run.objects.filter(owner=charlie).exists()


def test_a_checkpoint_of_a_run_one_may_see_is_evaluated(alices_client, make_run, promptset_version, dispatched):
    checkpoint = make_run(state="succeeded").checkpoints.create(step=1, path="/artifacts/runs/1/checkpoints/step_1")
    response = launch(alices_client, promptset_version, starting_checkpoint_id=checkpoint.pk)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.resolved_config.model.init_checkpoint == checkpoint.model_folder


def test_the_form_launches_an_evaluation_without_error_correction(alices_client, promptset_version, dispatched):
    from django.urls import reverse

    response = alices_client.post(reverse("runs:new"), {
        "name": "form eval", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "eval",
        "eval_samples": 3, "error_correction": "false"})
    assert response.status_code == 302, response.context["form"].errors if response.context else response
    run = Run.objects.get(name="form eval")
    assert run.kind == "eval" and run.resolved_config.schedule.eval_samples == 3
    assert run.resolved_config.schedule.eval_error_correction is False


def test_manage_py_launch_run_launches_an_evaluation(alice, promptset_version, dispatched):
    from django.core.management import call_command

    call_command("launch_run", "alice", "--name", "cli eval", "--promptset-version", str(promptset_version.pk),
                 "--preset", "cpu-smoke", "--kind", "eval", "--set", "eval_samples=2", "--set", "error_correction=false")
    run = Run.objects.get(name="cli eval")
    assert run.kind == "eval" and run.resolved_config.schedule.eval_error_correction is False
