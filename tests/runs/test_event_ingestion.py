"""The ingester against the real Redis: streams in, Postgres rows and Channels messages out."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from proofs.models import ProofAttempt, RetryFeedback
from runs.ingest import EventIngester
from runs.models import RunEvent, RunState, StepMetrics
from runs.streams import GROUP
from tests.runs.event_helpers import publisher_for, rollout
from trainer.observability.events import EventType, stream_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_it_stores_each_rollout_as_a_proof_attempt_linked_to_its_problem(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.RUN_STARTED, {"preset": "cpu-demo"})
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout())
    EventIngester().poll_once()

    running_run.refresh_from_db()
    assert running_run.state == RunState.RUNNING
    attempt = ProofAttempt.objects.get(run=running_run)
    assert attempt.verdict == "valid" and attempt.reward == 1.0 and attempt.is_standin_verdict
    assert attempt.problem.problem_key == "add_small"


def test_an_event_delivered_twice_is_stored_once(running_run, redis_client):
    event = publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout())
    # The same event again, as a retrying publisher or a replayed stream would deliver it.
    redis_client.xadd(stream_key(str(running_run.pk)), event.to_stream_fields())
    ingester = EventIngester()
    ingester.poll_once()
    ingester.poll_once()
    assert RunEvent.objects.filter(run=running_run).count() == 1
    assert ProofAttempt.objects.filter(run=running_run).count() == 1


def test_events_are_acknowledged_after_they_are_stored(running_run, redis_client):
    publisher_for(running_run).publish(EventType.LOG, {"level": "info", "message": "hello"})
    EventIngester().poll_once()
    pending = redis_client.xpending(stream_key(str(running_run.pk)), GROUP)
    assert pending["pending"] == 0
    assert RunEvent.objects.get(run=running_run).payload["message"] == "hello"


def test_a_stream_whose_group_vanished_is_read_again_once_the_group_is_recreated(running_run, redis_client):
    ingester = EventIngester()
    ingester.poll_once()  # creates and remembers the run's group
    redis_client.delete(stream_key(str(running_run.pk)))  # as after a Redis restart without its data
    publisher_for(running_run).publish(EventType.LOG, {"level": "info", "message": "after the restart"})
    redis_client.xgroup_destroy(stream_key(str(running_run.pk)), GROUP)
    ingester.poll_once()  # notices, forgets
    ingester.poll_once()  # recreates the group and reads from the start
    assert RunEvent.objects.get(run=running_run).payload["message"] == "after the restart"


def test_a_censored_rollout_is_stored_without_a_reward(running_run, redis_client):
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(
        verdict="infra_error", reward=None, is_censored=True, reasons=["stand-in cannot decide"]))
    EventIngester().poll_once()
    attempt = ProofAttempt.objects.get(run=running_run)
    assert attempt.reward is None and attempt.is_censored
    assert "not counted as wrong" in attempt.zero_reason


def test_a_retry_is_linked_to_its_first_attempt(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0", verdict="lean_error", reward=0.0))
    publisher.publish(EventType.RETRY_CREATED, {"parent_rollout_key": "s1-p0-r0", "feedback": "error: x", "step": 1})
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="s2-retry-0", turn="retry",
                                                          parent_rollout_key="s1-p0-r0"))
    EventIngester().poll_once()
    retry = ProofAttempt.objects.get(rollout_key="s2-retry-0")
    assert retry.parent.rollout_key == "s1-p0-r0"
    assert RetryFeedback.objects.get(run=running_run).parent == retry.parent


def test_metrics_and_the_end_of_the_run_update_the_run(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.RUN_STARTED, {})
    publisher.publish(EventType.STEP_STARTED, {"step": 1})
    publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward_mean": 0.25}})
    publisher.publish(EventType.RUN_FINISHED, {"status": "failed", "reason": "Lean server unreachable at http://x"})
    EventIngester().poll_once()
    running_run.refresh_from_db()
    assert running_run.current_step == 1
    assert StepMetrics.objects.get(run=running_run, step=1).values == {"reward_mean": 0.25}
    assert running_run.state == RunState.FAILED
    assert running_run.failure_reason == "Lean server unreachable at http://x"


def test_stored_events_are_forwarded_to_the_runs_channels_group(running_run, redis_client):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(running_run.group_name, channel)
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(reasoning="<script>alert(1)</script>"))
    EventIngester().poll_once()
    message = async_to_sync(layer.receive)(channel)
    stored = RunEvent.objects.get(run=running_run)
    [event] = message["events"]
    assert event["id"] == stored.pk
    assert event["payload"]["reasoning"] == "<script>alert(1)</script>"  # escaped by the page, not here
    assert event["payload"]["attempt_id"] == ProofAttempt.objects.get(run=running_run).pk


def test_a_burst_is_forwarded_in_a_few_messages_in_order(running_run, redis_client):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(running_run.group_name, channel)
    publisher = publisher_for(running_run)
    for index in range(250):
        publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key=f"s1-p0-r{index}"))
    EventIngester().poll_once()
    received = []
    while len(received) < 250:
        received.extend(async_to_sync(layer.receive)(channel)["events"])
    assert [e["payload"]["rollout_key"] for e in received] == [f"s1-p0-r{index}" for index in range(250)]


def test_it_stores_the_format_checks_words_and_the_lines_it_failed_on(running_run, redis_client):
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(
        verdict=None, reward=0.0, format_error="generation_repeats", format_detail="the line 'x' occurs 6 times",
        format_failure_lines=[[3, 5], [9, 9]],
    ))
    EventIngester().poll_once()
    attempt = ProofAttempt.objects.get(run=running_run)
    assert attempt.format_detail == "the line 'x' occurs 6 times"
    assert attempt.format_failure_lines == [[3, 5], [9, 9]]
    assert attempt.zero_reason == "Format: GENERATION_REPEATS: the line 'x' occurs 6 times"


def test_a_retry_stored_after_its_first_attempt_is_linked_to_it(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key="s1-p0-r0", verdict="lean_error", reward=0.0))
    EventIngester().poll_once()
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="s2-retry-0", turn="retry",
                                                          parent_rollout_key="s1-p0-r0"))
    EventIngester().poll_once()
    retry = ProofAttempt.objects.get(rollout_key="s2-retry-0")
    assert retry.parent.rollout_key == "s1-p0-r0" and retry.problem.problem_key == "add_small"
