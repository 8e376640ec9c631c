"""Fair sharing: runs over their owner's (or group's) limits wait in the queue with a reason, and start
when a slot frees; administrators set priorities, pause the queue and preempt runs."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from runs import actions, scheduling
from runs.models import QueueState, Quota, Run, RunState
from trainer.config import RunConfig

pytestmark = pytest.mark.django_db


@pytest.fixture
def launch(django_capture_on_commit_callbacks, promptset_version):
    promptset_version.promptset.is_public = True
    promptset_version.promptset.save()

    def go(owner, name, preset="cpu-smoke"):
        with django_capture_on_commit_callbacks(execute=True):
            return actions.launch_run(owner=owner, request={
                "name": name, "promptset_version_id": promptset_version.pk, "preset": preset})

    return go


@pytest.fixture
def finish(django_capture_on_commit_callbacks):
    def go(run, state=RunState.SUCCEEDED):
        run.refresh_from_db()
        with django_capture_on_commit_callbacks(execute=True):
            if run.state == RunState.QUEUED:
                assert run.transition(RunState.STARTING)
            assert run.transition(state, reason="done")

    return go


def admitted(*runs):
    return [Run.objects.get(pk=run.pk).admitted_at is not None for run in runs]


def test_a_run_over_the_concurrent_limit_waits_with_its_reason_then_starts_when_a_slot_frees(
        alice, launch, finish, dispatched, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 2
    first, second, third = launch(alice, "one"), launch(alice, "two"), launch(alice, "three")
    assert admitted(first, second, third) == [True, True, False]
    assert dispatched == [first.pk, second.pk]
    third.refresh_from_db()
    assert third.state == RunState.QUEUED
    assert third.queue_reason == "waiting for a slot: alice's runs hold 2 of 2 concurrent runs"

    finish(first)
    assert admitted(third) == [True] and dispatched[-1] == third.pk
    assert Run.objects.get(pk=third.pk).queue_reason == ""


def test_one_persons_full_quota_does_not_hold_up_anyone_else(alice, bob, launch, dispatched, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 1
    launch(alice, "a1")
    waiting = launch(alice, "a2")
    bobs = launch(bob, "b1")
    assert admitted(waiting, bobs) == [False, True]


def test_gpus_are_limited_per_person(alice, launch, finish, dispatched):
    Quota.objects.create(user=alice, max_concurrent_runs=5, max_gpus=8)
    first, second = launch(alice, "big one", preset="h100x8"), launch(alice, "big two", preset="h100x8")
    assert admitted(first, second) == [True, False]
    assert Run.objects.get(pk=second.pk).queue_reason == (
        "waiting for GPUs: alice's runs hold 8 of 8 GPUs and this run needs 8")
    finish(first, RunState.FAILED)
    assert admitted(second) == [True]


def test_a_run_that_could_never_fit_the_quota_is_refused_at_launch(alice, launch, dispatched):
    Quota.objects.create(user=alice, max_concurrent_runs=5, max_gpus=4)
    with pytest.raises(actions.LaunchError, match="needs 8 GPUs, more than alice's limit of 4"):
        launch(alice, "too big", preset="h100x8")
    assert Run.objects.count() == 0


def test_a_groups_limit_counts_its_members_runs_together(alice, bob, launch, finish, dispatched, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 5
    lab = Group.objects.create(name="lab")
    lab.user_set.add(alice, bob)
    Quota.objects.create(group=lab, max_concurrent_runs=1, max_gpus=0)
    alices = launch(alice, "a1")
    bobs = launch(bob, "b1")
    assert admitted(alices, bobs) == [True, False]
    assert "the group lab's runs hold 1 of 1 concurrent runs" in Run.objects.get(pk=bobs.pk).queue_reason
    finish(alices)
    assert admitted(bobs) == [True]


def test_runs_leave_the_queue_by_priority_then_in_order(alice, launch, finish, dispatched, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 1
    running = launch(alice, "running")
    early, late = launch(alice, "early"), launch(alice, "late")
    assert list(scheduling.queue_positions()) == [early.pk, late.pk]
    Run.objects.filter(pk=late.pk).update(priority=10)  # an administrator raised it
    assert list(scheduling.queue_positions()) == [late.pk, early.pk]
    finish(running)
    assert admitted(late, early) == [True, False]


def test_a_paused_queue_starts_nothing_and_says_so(alice, launch, dispatched, django_capture_on_commit_callbacks):
    QueueState.objects.create(pk=1, is_paused=True, reason="cluster maintenance until 14:00")
    run = launch(alice, "patient")
    assert admitted(run) == [False] and dispatched == []
    assert Run.objects.get(pk=run.pk).queue_reason == (
        "the queue is paused by an administrator: cluster maintenance until 14:00")
    QueueState.objects.filter(pk=1).update(is_paused=False)
    assert scheduling.schedule() == [run.pk]


def test_a_preempted_run_is_stopped_and_queued_again_to_resume_from_its_checkpoint(
        alice, bob, launch, finish, dispatched, monkeypatch, django_capture_on_commit_callbacks, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 1
    stopped = []
    monkeypatch.setattr("runs.ray_jobs.stop", stopped.append)
    run = launch(alice, "long one")
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, ray_job_id=f"run-{run.pk}-attempt-1", attempt=1)
    run.refresh_from_db()
    waiting = launch(alice, "next")
    with django_capture_on_commit_callbacks(execute=True):
        assert actions.preempt_run(run)
    run.refresh_from_db()
    assert stopped == [f"run-{run.pk}-attempt-1"]  # the attempt's own job, by its predictable id
    assert run.attempt == 2  # queued again as the next attempt: the stopped job's ending cannot touch it
    assert [c.state for c in run.state_changes.all()][-2:] == [RunState.CANCELLED, RunState.QUEUED]
    # It went to the back of the queue: the waiting run took the slot; the preempted one resumes after it.
    assert admitted(waiting, run) == [True, False]
    finish(waiting)
    assert admitted(run) == [True] and dispatched[-1] == run.pk
    assert Run.objects.get(pk=run.pk).attempt == 2  # dispatched as its next attempt, which resumes


def test_the_runs_page_shows_each_of_my_queued_runs_with_its_place_and_reason(
        client, alice, bob, launch, dispatched, settings):
    settings.RUN_QUOTA_DEFAULT_CONCURRENT_RUNS = 1
    launch(alice, "alice running")
    launch(bob, "bob running")
    launch(alice, "alice waits")
    launch(bob, "bob waits")
    client.force_login(bob)
    queue = client.get(reverse("runs:list")).context["queue"]
    assert [(row["position"], row["name"]) for row in queue] == [(2, "bob waits")]
    assert queue[0]["reason"] == "waiting for a slot: bob's runs hold 1 of 1 concurrent runs"
    page = client.get(reverse("runs:list")).content.decode()
    assert "alice waits" not in page and "#2" in page


def test_the_resolved_gpus_of_a_run_come_from_its_config():
    assert scheduling.run_gpus(Run(config=RunConfig.from_preset("h100x8").to_json_dict())) == 8


def test_an_administrator_preempts_and_pauses_through_the_admin(
        client, django_user_model, alice, launch, dispatched, monkeypatch, django_capture_on_commit_callbacks):
    admin_user = django_user_model.objects.create_superuser("root", password="a long admin password")
    client.force_login(admin_user)
    monkeypatch.setattr("runs.ray_jobs.stop", lambda job_id: None)
    run = launch(alice, "long one")
    Run.objects.filter(pk=run.pk).update(state=RunState.RUNNING, ray_job_id=f"run-{run.pk}-attempt-1", attempt=1)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("admin:runs_run_changelist"),
                               {"action": "preempt", "_selected_action": [run.pk]}, follow=True)
    assert "Preempted long one" in response.content.decode()
    assert Run.objects.get(pk=run.pk).state == RunState.QUEUED
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("admin:runs_queuestate_change", args=[QueueState.current().pk]),
                    {"is_paused": "on", "reason": "upgrade"})
    assert QueueState.current().is_paused and QueueState.current().reason == "upgrade"
