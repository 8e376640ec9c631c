"""A training run whose ``eval_every`` is more than its steps would never evaluate (the first evaluation comes after
step eval_every): the launch refuses a chosen one on the field, through every door and in the launch summary, saying
the largest value that works (issue 45); the preset's own eval_every past a run made shorter is warned about before
the launch instead, since the person did not choose it. An evaluation run evaluates once whatever eval_every says."""

import pytest
from django.urls import reverse

from runs.models import Run

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dispatched")]


def launch(client, version, **fields):
    body = {"name": "r", "promptset_version_id": version.pk, "preset": "cpu-demo", **fields}
    return client.post("/api/runs/", body, content_type="application/json")


def test_an_eval_every_past_the_last_step_is_refused_on_the_field(alices_client, promptset_version):
    response = launch(alices_client, promptset_version, total_steps=5, eval_every=8)
    assert response.status_code == 422, response.content
    (message,) = response.json()["field_errors"]["eval_every"]
    assert "is 8, more than the run's 5 training steps, so no evaluation would run" in message
    assert "set eval_every to at most 5, or to 0 for no evaluation" in message
    assert not Run.objects.exists()


def test_the_form_shows_the_refusal_under_the_field(alices_client, promptset_version):
    response = alices_client.post(reverse("runs:new"), {
        "name": "r", "promptset_version": promptset_version.pk, "preset": "cpu-smoke", "kind": "rl",
        "total_steps": 2, "eval_every": 3})
    assert response.status_code == 200
    assert "more than the run's 2 training steps" in response.context["form"].errors["eval_every"][0]
    assert not Run.objects.exists()


@pytest.mark.parametrize("fields", [{"total_steps": 5, "eval_every": 5}, {"total_steps": 5, "eval_every": 0},
                                    {"kind": "eval", "preset": "cpu-smoke", "eval_every": 20}])
def test_an_eval_every_the_run_reaches_or_zero_or_an_evaluation_run_is_launched(alices_client, promptset_version,
                                                                              fields):
    assert launch(alices_client, promptset_version, **fields).status_code == 201


def test_the_summary_refuses_it_before_the_launch(alices_client):
    response = alices_client.get("/api/runs/launch-summary", {"preset": "cpu-demo", "total_steps": 5, "eval_every": 8})
    assert response.status_code == 422
    assert "set eval_every to at most 5" in response.json()["field_errors"]["eval_every"][0]


def test_the_presets_eval_every_past_a_shorter_run_is_warned_about_not_refused(alices_client, promptset_version):
    summary = alices_client.get("/api/runs/launch-summary", {"preset": "cpu-demo", "total_steps": 3}).json()
    assert summary["warnings"] == ["The preset's eval_every is 10, more than the run's 3 training steps, so no "
                                   "evaluation would run (the first comes after step 10); set eval_every to at most 3, "
                                   "or to 0 for no evaluation."]
    assert launch(alices_client, promptset_version, total_steps=3).status_code == 201


def test_the_presets_own_eval_every_sent_back_by_the_form_is_no_choice_and_only_warned_about(alices_client,
                                                                                          promptset_version):
    """The launch form fills eval_every with the preset's value (cpu-demo's 10): a person who shortened the run and
    left that field alone is told, not refused."""
    summary = alices_client.get("/api/runs/launch-summary",
                                {"preset": "cpu-demo", "total_steps": 1, "eval_every": 10}).json()
    assert summary["warnings"][0].startswith("The preset's eval_every is 10, more than the run's 1 training steps")
    assert launch(alices_client, promptset_version, total_steps=1, eval_every=10).status_code == 201
