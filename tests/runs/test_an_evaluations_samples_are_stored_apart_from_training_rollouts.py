"""A training run's periodic evaluation stores its samples at the step it evaluated, beside that step's training
rollouts and told apart from them (``is_evaluation``), as the proof viewer's filter and the benchmark's solved
matrix read them; a rollout from a trainer that did not say is a training rollout."""

import pytest

from proofs.models import ProofAttempt
from runs.ingest import EventIngester
from tests.runs.event_helpers import add_raw, event_json, publisher_for, rollout
from trainer.observability.events import EventType

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_evaluation_sample_is_stored_as_one_beside_the_training_rollouts_of_its_step(running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="a1-s2-p0-r0"))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="a1-eval2-p0-r0", is_evaluation=True,
                                                          verdict="lean_error", reward=0.0))
    EventIngester().poll_once()
    stored = dict(ProofAttempt.objects.filter(run=running_run, step=2).values_list("rollout_key", "is_evaluation"))
    assert stored == {"a1-s2-p0-r0": False, "a1-eval2-p0-r0": True}


def test_a_rollout_from_a_trainer_that_does_not_say_is_a_training_rollout(running_run, redis_client):
    payload = rollout(step=1, key="s1-p0-r0").model_dump(mode="json")
    del payload["is_evaluation"]  # as an older trainer published it
    add_raw(redis_client, running_run, {"event": event_json(running_run, EventType.ROLLOUT_FINISHED, payload)})
    EventIngester().poll_once()
    attempt = ProofAttempt.objects.get(run=running_run)
    assert attempt.is_evaluation is False


def test_the_proof_viewer_lists_a_steps_training_rollouts_or_its_evaluation_samples_on_demand(
        running_run, redis_client, alices_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="a1-s2-p0-r0"))
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(step=2, key="a1-eval2-p0-r0", is_evaluation=True))
    EventIngester().poll_once()

    def listed(**filters):
        response = alices_client.get(f"/api/proofs/runs/{running_run.pk}/rollouts", {"step": 2, **filters})
        assert response.status_code == 200, response.content
        return {(card["rollout_key"], card["is_evaluation"]) for card in response.json()["rollouts"]}

    assert listed() == {("a1-s2-p0-r0", False), ("a1-eval2-p0-r0", True)}
    assert listed(purpose="training") == {("a1-s2-p0-r0", False)}
    assert listed(purpose="evaluation") == {("a1-eval2-p0-r0", True)}
    page = alices_client.get(f"/runs/{running_run.pk}/", {"step": 2, "purpose": "evaluation"}).content.decode()
    assert "a1-eval2-p0-r0" in page and "a1-s2-p0-r0" not in page and "evaluation of step 2" in page
    assert alices_client.get(f"/api/proofs/runs/{running_run.pk}/rollouts", {"purpose": "both"}).status_code == 422
