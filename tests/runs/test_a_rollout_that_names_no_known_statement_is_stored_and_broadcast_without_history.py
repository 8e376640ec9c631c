"""A rollout whose problem is not in the run's promptset and which carries no statement (a trainer that sends only
the problem's id) names nothing the history could count it under: it is still stored, linked to its event and
forwarded to the run's page; only the history leaves it out. Before, the history's INSERT was sent with no rows, a
syntax error, and the whole batch was dead-lettered: the rollout never reached the database or the page."""

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from proofs.models import ProblemHistory, ProofAttempt
from runs.ingest import EventIngester
from runs.models import DeadLetter, RunEvent
from tests.runs.event_helpers import publisher_for, rollout
from trainer.observability.events import EventType, RolloutFinished

pytestmark = pytest.mark.django_db(transaction=True)


def unnamed_rollout(key="a1-s4-p0-r0"):
    """As tests/browser/test_the_run_page_draws_each_steps_phases_as_they_arrive.py publishes it: "p0" is in no
    promptset, and there is no formal statement."""
    return RolloutFinished(rollout_key=key, step=4, problem_id="p0", response="<think>x</think>", verdict="lean_error",
                           reward=0.0, policy_version=2)


def test_a_rollout_naming_no_known_statement_is_stored_linked_and_forwarded(running_run, redis_client):
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(running_run.group_name, channel)
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, unnamed_rollout())
    EventIngester().poll_once()

    assert list(DeadLetter.objects.values_list("error", flat=True)) == []
    attempt = ProofAttempt.objects.get(run=running_run)
    assert (attempt.rollout_key, attempt.problem_id, attempt.policy_version) == ("a1-s4-p0-r0", None, 2)
    assert attempt.event_id == RunEvent.objects.get(run=running_run).pk
    [event] = async_to_sync(layer.receive)(channel)["events"]
    assert event["payload"]["rollout_key"] == "a1-s4-p0-r0" and event["payload"]["attempt_id"] == attempt.pk
    assert not ProblemHistory.objects.exists()  # nothing names what it answered


def test_in_a_batch_beside_a_known_statement_only_the_known_one_is_counted(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, unnamed_rollout())
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=4, key="a1-s4-add-r0"))
    EventIngester().poll_once()

    assert not DeadLetter.objects.exists()
    assert set(ProofAttempt.objects.filter(run=running_run).values_list("rollout_key", flat=True)) == {
        "a1-s4-p0-r0", "a1-s4-add-r0"}
    assert list(ProblemHistory.objects.values_list("step", "answers", "scored", "accepted")) == [(4, 1, 1, 1)]
