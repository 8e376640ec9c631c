"""Elapsed is the time the trainer trained, over every attempt, by the trainer's own event times
(runs/queries.py RunClock): the runs list and the run page read this one number."""

from datetime import datetime, timedelta, timezone

import pytest

from runs.models import RunState, RunStateChange
from runs.queries import run_clocks

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 11, 30, 9, 0, tzinfo=timezone.utc)


def event(run, type, seconds, **payload):
    run.events.create(event_id=f"{run.pk}-{type}-{seconds}", seq=int(seconds * 1000), type=type,
                      run_seq=run.events.count() + 1,
                      payload=payload, published_at=T0 + timedelta(seconds=seconds))


def test_a_short_run_stored_in_one_batch_trained_for_its_events_time_not_zero(make_run):
    run = make_run(state=RunState.SUCCEEDED, kind="sft", started_at=T0 + timedelta(seconds=30),
                   finished_at=T0 + timedelta(seconds=30))  # the ingester stored start and end at once
    event(run, "run_started", 0, total_steps=12)
    event(run, "run_finished", 5, status="succeeded")
    clock = run_clocks([run])[run.pk]
    assert (clock.elapsed_s(), clock.total_steps) == (5.0, 12)


def test_a_cancelled_then_resumed_run_adds_both_attempts(make_run):
    run = make_run(state=RunState.SUCCEEDED)
    event(run, "run_started", 0)
    RunStateChange.objects.create(run=run, state=RunState.CANCELLED, at=T0 + timedelta(seconds=120))
    event(run, "run_started", 600)
    event(run, "run_finished", 603, status="succeeded")
    assert run_clocks([run])[run.pk].elapsed_s() == 123.0


def test_a_running_run_counts_on_from_its_current_start(make_run):
    run = make_run(state=RunState.RUNNING)
    event(run, "run_started", 0)
    RunStateChange.objects.create(run=run, state=RunState.FAILED, at=T0 + timedelta(seconds=10))
    event(run, "run_started", 100)
    clock = run_clocks([run])[run.pk]
    assert clock.elapsed_s(now=T0 + timedelta(seconds=130)) == 40.0


def test_a_run_that_never_started_has_no_elapsed_time_and_an_rl_run_its_configured_steps(make_run):
    run = make_run(state=RunState.QUEUED)
    clock = run_clocks([run])[run.pk]
    assert clock.elapsed_s() is None and clock.total_steps == run.config["schedule"]["total_steps"]
