"""The pipeline's form and API are one door (pipelines.actions.launch_pipeline): the same fields, each stage's launch
fields checked by the runs' launch contract, errors per field with the value and the fix; a stranger sees nothing."""

import pytest

from pipelines.models import Pipeline

pytestmark = pytest.mark.django_db


def post(client, body):
    return client.post("/api/pipelines/", body, content_type="application/json")


def test_a_stage_setting_out_of_the_presets_bounds_is_refused_naming_the_stage_and_the_field(
        alices_client, pipeline_request):
    response = post(alices_client, {**pipeline_request, "rl_fields": {"total_steps": 10**6}})
    assert response.status_code == 422
    assert any("total_steps" in message for message in response.json()["field_errors"]["rl_fields"])
    assert not Pipeline.objects.exists()


def test_a_stage_field_the_pipeline_sets_itself_is_refused(alices_client, pipeline_request):
    response = post(alices_client, {**pipeline_request, "sft_fields": {"kind": "rl"}})
    assert response.status_code == 422
    assert "set by the pipeline" in response.json()["field_errors"]["sft_fields"][0]


def test_the_benchmark_must_be_held_out(alices_client, pipeline_request):
    response = post(alices_client, {**pipeline_request, "benchmark_version_id": pipeline_request["training_version_id"]})
    assert response.status_code == 422
    assert "training promptset too" in response.json()["field_errors"]["benchmark_version_id"][0]


def test_an_unknown_field_is_refused(alices_client, pipeline_request):
    response = post(alices_client, {**pipeline_request, "learning_rate": 1.0})
    assert response.status_code == 422 and "learning_rate" in response.json()["field_errors"]


def test_the_form_launches_what_the_api_would(alices_client, pipeline_request, dispatched, settings, tmp_path):
    settings.ARTIFACTS_DIR = tmp_path
    response = alices_client.post("/pipelines/new/", {
        "name": "from the form", "preset": "cpu-smoke", "training_version": pipeline_request["training_version_id"],
        "benchmark_version": pipeline_request["benchmark_version_id"], "harvest_samples": 2, "benchmark_samples": 2,
        "sft_fields": "{}", "rl_fields": '{"total_steps": 2}', "sft_start": "last", "rl_max_win_rate": 0.5,
        "max_iterations": 2, "min_gain": 1})
    pipeline = Pipeline.objects.get(name="from the form")
    assert response.status_code == 302 and response["Location"] == f"/pipelines/{pipeline.pk}/"
    assert pipeline.rl_fields == {"total_steps": 2} and pipeline.training_version_id == pipeline_request["training_version_id"]
    page = alices_client.get(f"/pipelines/{pipeline.pk}/").content.decode()
    assert "from the form" in page and "No iteration yet" in page


def test_a_form_with_rl_fields_that_are_not_json_says_how_to_write_them(alices_client, pipeline_request):
    response = alices_client.post("/pipelines/new/", {
        "name": "bad", "preset": "cpu-smoke", "training_version": pipeline_request["training_version_id"],
        "benchmark_version": pipeline_request["benchmark_version_id"], "harvest_samples": 2, "benchmark_samples": 2,
        "rl_fields": "total_steps=2", "sft_start": "last", "rl_max_win_rate": 0.5, "max_iterations": 2, "min_gain": 1})
    assert response.status_code == 200 and "not JSON" in response.content.decode()
    assert not Pipeline.objects.exists()


def test_a_stranger_cannot_see_or_cancel_a_pipeline(client, charlie, alice, pipeline_request, dispatched):
    from pipelines import actions

    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    client.force_login(charlie)
    assert client.get(f"/api/pipelines/{pipeline.pk}").status_code == 404
    assert client.get(f"/pipelines/{pipeline.pk}/").status_code == 404
    assert client.post(f"/api/pipelines/{pipeline.pk}/cancel").status_code == 404
    assert client.get("/api/pipelines/").json() == []
