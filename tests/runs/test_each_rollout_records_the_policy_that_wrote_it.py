"""Each proof attempt keeps the policy version that wrote it (``rollout_finished``'s ``policy_version``, issue 25)
and the proof viewer says it beside the step; an event from before the field (no ``policy_version``) is still a
valid rollout, stored with the version unknown and shown without one."""

import pytest

from proofs.models import ProofAttempt
from runs.ingest import EventIngester
from runs.models import DeadLetter
from tests.runs.event_helpers import publisher_for, rollout
from trainer.observability.events import EventType

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_ingester_stores_the_policy_version_that_wrote_each_rollout(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=5, key="s5-p0-r0", policy_version=3))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=5, key="s5-p0-r1", policy_version=0))
    EventIngester().poll_once()
    stored = dict(ProofAttempt.objects.filter(run=running_run).values_list("rollout_key", "policy_version"))
    assert stored == {"s5-p0-r0": 3, "s5-p0-r1": 0}  # 0, the starting weights, is a version, not "unknown"


def test_a_rollout_event_from_before_policy_versions_is_stored_with_the_version_unknown(running_run, redis_client):
    old_payload = rollout(step=1).model_dump(mode="json")
    del old_payload["policy_version"]  # as a trainer from before issue 25 sends it
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, old_payload)
    EventIngester().poll_once()
    assert not DeadLetter.objects.exists()
    assert ProofAttempt.objects.get(run=running_run).policy_version is None


def test_the_proof_viewer_says_which_policy_wrote_the_rollout_and_how_far_behind_it_trained(client, alice, running_run,
                                                                                           redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=5, key="s5-p0-r0", policy_version=3))
    publisher.publish(EventType.METRICS, {"step": 5, "values": {"rollout/policy_version": 5}})
    EventIngester().poll_once()
    client.force_login(alice)
    page = client.get(ProofAttempt.objects.get(run=running_run).get_absolute_url()).content.decode()
    assert "written by policy v3 (3 learner updates)" in page
    assert "trained on at step 5, by policy v5" in page
    assert '<span id="updates-behind">2 updates behind</span>' in page


def test_the_proof_viewer_says_nothing_of_a_policy_it_was_not_told(client, alice, running_run, redis_client):
    publisher_for(running_run).publish(EventType.ROLLOUT_FINISHED, rollout(step=5))
    EventIngester().poll_once()
    client.force_login(alice)
    page = client.get(ProofAttempt.objects.get(run=running_run).get_absolute_url()).content.decode()
    assert 'id="policy-version"' not in page and "policy v" not in page


def test_the_run_pages_cards_and_the_api_say_the_policy_where_it_is_known(client, alice, running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=5, key="s5-p0-r0", policy_version=3))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=5, key="s5-p0-r1"))
    EventIngester().poll_once()
    client.force_login(alice)
    page = client.get(running_run.get_absolute_url()).content.decode()
    assert page.count("(written by policy v") == 1 and "(written by policy v3)" in page
    cards = client.get(f"/api/proofs/runs/{running_run.pk}/rollouts").json()["rollouts"]
    assert {card["rollout_key"]: card["policy_version"] for card in cards} == {"s5-p0-r0": 3, "s5-p0-r1": None}
