"""One rollout's per-token records come from its step's file beside the run's artifacts, through the API, to the
people who see the run (its owner, those it is shared with) and nobody else; a rollout without records says so
rather than answering zeros."""

import math

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db


def stored_record(key: str) -> token_records.TokenRecord:
    return token_records.TokenRecord(
        rollout_key=key, advantage=-0.375, token_ids=[40, 41, 42, 43],
        engine_logprobs=[-0.25, -1.5, 0.0, -3.0], learner_logprobs=[-0.2500001, -1.25, -0.5, -0.75],
        entropies=[0.5, 1.25, 2.0, 0.125], loss_weights=[1.0, 1.0, 0.0, 1.0],
        flags=[0, token_records.IS_CLIPPED_LOW, token_records.IS_CONTEXT, token_records.IS_DUAL_CLIPPED],
    )


@pytest.fixture
def recorded(make_run, make_attempt):
    run = make_run(state="running")
    attempt = make_attempt(run, step=2, rollout_key="a1-s2-p0-r1")
    other = make_attempt(run, step=2, rollout_key="a1-s2-p0-r2")
    token_records.write_step_records(run.artifacts_dir, 2, 1, [stored_record(attempt.rollout_key), stored_record(other.rollout_key)],
                                     lambda ids: [f"<t{i}>" for i in ids])
    return run, attempt


def test_the_owner_reads_the_stored_figures_of_each_token(recorded, alice, logged_in):
    run, attempt = recorded
    body = logged_in(alice).get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()
    record = stored_record(attempt.rollout_key)
    tokens = body["tokens"]
    assert body["is_recorded"] is True and body["advantage"] == -0.375
    assert tokens["token_texts"] == ["<t40>", "<t41>", "<t42>", "<t43>"]
    assert tokens["learner_logprob"] == token_records.read_rollout(run.artifacts_dir, 2, 1, attempt.rollout_key)["learner_logprob"]
    assert math.isclose(tokens["learner_logprob"][0], record.learner_logprobs[0], rel_tol=1e-7)
    assert tokens["engine_logprob"] == [-0.25, -1.5, None, -3.0]  # none at the context token
    assert tokens["entropy"] == [0.5, 1.25, 2.0, 0.125] and tokens["loss_weight"] == [1.0, 1.0, 0.0, 1.0]
    assert tokens["flags"] == list(record.flags)
    assert body["flag_bits"] == {"context": 1, "clip_low": 2, "clip_high": 4, "dual_clip": 8, "capped": 16}
    # log(π_old / π_engine) outside [log 0.5, log 2]: the third token is context, the fourth is 2.25 out.
    assert body["ratio_outside_tokens"] == 1


def test_someone_the_run_is_shared_with_reads_them_too(recorded, bob, logged_in):
    run, attempt = recorded
    run.shared_with.add(bob)
    assert logged_in(bob).get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()["is_recorded"] is True


def test_a_stranger_gets_not_found(recorded, charlie, logged_in):
    _, attempt = recorded
    assert logged_in(charlie).get(f"/api/proofs/attempts/{attempt.pk}/tokens").status_code == 404


def test_nobody_logged_out_reads_them(recorded, client):
    _, attempt = recorded
    assert client.get(f"/api/proofs/attempts/{attempt.pk}/tokens").status_code in (401, 403)


def test_a_rollout_without_records_says_so_with_no_tokens(recorded, make_attempt, alice, logged_in):
    run, _ = recorded
    unrecorded = make_attempt(run, step=3, rollout_key="a1-s3-p0-r0")
    evaluation = make_attempt(run, step=2, rollout_key="a1-eval2-p0-r0", is_evaluation=True)
    for attempt in (unrecorded, evaluation):
        body = logged_in(alice).get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()
        assert body["is_recorded"] is False and body["tokens"] == {} and body["advantage"] is None
