"""The Django admin shows every model of the platform, keeps the trainer's record read-only, and
cancels or resumes runs through the same actions as the run page."""

import pytest
from django.apps import apps
from django.contrib import admin
from django.urls import reverse

pytestmark = pytest.mark.django_db

OUR_APPS = ("accounts", "promptsets", "runs", "proofs", "pipelines")
# Through-tables edited only as part of their owner (a version's problem list is immutable).
NOT_ON_THEIR_OWN = {"promptsets.versionproblem"}


@pytest.fixture
def operator(django_user_model):
    return django_user_model.objects.create_superuser("operator", password="operator-password")


def our_models():
    return [model for app in OUR_APPS for model in apps.get_app_config(app).get_models()
            if model._meta.label_lower not in NOT_ON_THEIR_OWN]


def test_every_model_of_the_platform_is_registered():
    missing = [model._meta.label for model in our_models() if not admin.site.is_registered(model)]
    assert missing == [], f"register these in their app's admin.py: {missing}"


def test_every_model_list_loads_with_its_filters_and_search(client, operator, make_run):
    make_run(state="running")
    client.force_login(operator)
    for model in our_models():
        url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        response = client.get(url, {"q": "a"})
        assert response.status_code == 200, f"{url}: {response.status_code}"


def test_the_trainers_record_cannot_be_edited(client, operator, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running")
    attempt = ProofAttempt.objects.create(run=run, rollout_key="s1-r1", step=1, problem_key="add_small",
                                          verdict="lean_error", reward=0.0)
    event = run.events.create(event_id="e-1", seq=1, run_seq=1, type="log", payload={"message": "hi"},
                              published_at="2026-11-30T10:00:00Z")
    client.force_login(operator)
    for obj in (attempt, event):
        url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
        page = client.get(url)
        assert page.status_code == 200
        assert b'name="_save"' not in page.content
        assert client.post(url, {}).status_code == 403
        delete_url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_delete", args=[obj.pk])
        assert client.post(delete_url, {"post": "yes"}).status_code == 403
    assert type(attempt).objects.filter(pk=attempt.pk).exists()


def test_a_runs_configuration_cannot_be_changed_in_the_admin(client, operator, make_run):
    run = make_run(state="running")
    client.force_login(operator)
    url = reverse("admin:runs_run_change", args=[run.pk])
    response = client.post(url, {"name": "renamed", "config": "{}", "state": "succeeded",
                                 "state_changes-TOTAL_FORMS": "0", "state_changes-INITIAL_FORMS": "0"})
    assert response.status_code == 302, response.content.decode()[:2000]
    run.refresh_from_db()
    assert run.name == "renamed"
    assert run.state == "running"
    assert run.config["preset"] == "cpu-demo"


def test_the_cancel_action_cancels_like_the_run_page_does(client, operator, make_run):
    running = make_run(state="running", name="going")
    finished = make_run(state="succeeded", name="done")
    client.force_login(operator)
    response = client.post(reverse("admin:runs_run_changelist"),
                           {"action": "cancel_selected", "_selected_action": [running.pk, finished.pk]}, follow=True)
    running.refresh_from_db()
    finished.refresh_from_db()
    assert running.state == "cancelled"
    assert "cancelled by operator (admin)" in running.state_changes.values_list("reason", flat=True)
    assert finished.state == "succeeded"
    text = response.content.decode()
    assert "1 run(s) cancelled: going." in text
    assert "1 run(s) left as they were" in text


def test_the_resume_action_queues_a_failed_run_again(client, operator, make_run, django_capture_on_commit_callbacks,
                                                     dispatched):
    failed = make_run(state="failed", name="broken")
    client.force_login(operator)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:runs_run_changelist"), {"action": "resume_selected", "_selected_action": [failed.pk]})
    failed.refresh_from_db()
    assert failed.state == "queued" and failed.attempt == 2  # its next attempt, which resumes
    assert dispatched == [failed.pk]
