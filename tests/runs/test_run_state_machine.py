import pytest

from runs.models import Run, RunState

pytestmark = pytest.mark.django_db


def test_a_queued_run_can_start_and_records_the_change(make_run):
    run = make_run()
    assert run.transition(RunState.STARTING, reason="submitting")
    assert Run.objects.get(pk=run.pk).state == RunState.STARTING
    assert list(run.state_changes.values_list("state", "reason")) == [("starting", "submitting")]


def test_only_one_of_two_racing_transitions_wins(make_run):
    run = make_run(state="running")
    stale_copy = Run.objects.get(pk=run.pk)
    assert run.transition(RunState.CANCELLED, reason="owner")
    assert not stale_copy.transition(RunState.SUCCEEDED)
    assert Run.objects.get(pk=run.pk).state == RunState.CANCELLED


def test_a_succeeded_run_cannot_be_failed_afterwards(make_run):
    run = make_run(state="succeeded")
    assert not run.mark_failed("late error")
    run.refresh_from_db()
    assert run.state == RunState.SUCCEEDED and run.failure_reason == ""


def test_marking_failed_stores_the_reason_and_the_end_time(make_run):
    run = make_run(state="running")
    assert run.mark_failed("the Ray job failed: OOM")
    run.refresh_from_db()
    assert run.failure_reason == "the Ray job failed: OOM"
    assert run.finished_at is not None


@pytest.mark.parametrize("state, can_resume, can_cancel", [
    ("queued", False, True), ("starting", False, True), ("running", False, True),
    ("succeeded", False, False), ("failed", True, False), ("cancelled", True, False),
])
def test_which_runs_can_be_cancelled_or_resumed(make_run, state, can_resume, can_cancel):
    run = make_run(state=state)
    assert run.can_resume() is can_resume
    assert run.can_cancel() is can_cancel


def test_runs_are_visible_to_their_owner_and_people_they_are_shared_with(make_run, alice, bob, charlie):
    run = make_run()
    run.shared_with.add(bob)
    assert run.is_visible_to(alice) and run.is_visible_to(bob)
    assert not run.is_visible_to(charlie)
    assert list(Run.objects.visible_to(charlie)) == []
    assert run.is_editable_by(alice) and not run.is_editable_by(bob)
