"""Where a rollout's tokens are missing, the API says whether they are still to come or never will be.

A step's token records are written in the background after its learner step, so a live run's newest step has no
file for a while: that is ``pending`` ("not written yet"), never "not recorded". ``not_recorded`` is for good, with
the reason: an evaluation sample, an answer never trained, a step the retention removed, a write that failed, a run
that ended (or an attempt that was superseded) before the write. The rollout page puts its own words before the
reason (tests/browser/test_the_rollout_page_waits_for_tokens_being_written_and_says_when_there_will_be_none.py).
"""

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db


def record(key: str) -> token_records.TokenRecord:
    return token_records.TokenRecord(rollout_key=key, advantage=0.5, token_ids=[1, 2], engine_logprobs=[-0.5, -1.0],
                                     learner_logprobs=[-0.5, -1.0], entropies=[0.1, 0.2], loss_weights=[1.0, 1.0],
                                     flags=[0, 0])


def write_step(run, step: int, keys=(), attempt: int = 1) -> None:
    token_records.write_step_records(run.artifacts_dir, step, attempt, [record(key) for key in keys],
                                     lambda ids: [f"<t{i}>" for i in ids])


def tokens_of(client, attempt) -> dict:
    body = client.get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()
    assert body["tokens"] == {} or body["state"] == "recorded"
    return body


@pytest.fixture
def live_run(make_run):
    return make_run(state="running")


def test_a_live_runs_newest_step_is_not_written_yet(live_run, make_attempt, alice, logged_in):
    write_step(live_run, 1, ["a1-s1-p0-r0"])
    newest = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    body = tokens_of(logged_in(alice), newest)
    assert body["state"] == "pending" and body["is_recorded"] is False
    assert "after its learner step" in body["reason"]


def test_a_step_handed_to_the_writer_is_being_written(live_run, make_attempt, alice, logged_in):
    write_step(live_run, 3, ["a1-s3-p0-r0"])  # a later step already written: the marker is what tells
    token_records.marker_path(live_run.artifacts_dir, 2, 1, token_records.PENDING).touch()
    attempt = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    body = tokens_of(logged_in(alice), attempt)
    assert body["state"] == "pending" and "being written" in body["reason"]


def test_once_written_the_same_rollout_is_recorded(live_run, make_attempt, alice, logged_in):
    marker = token_records.marker_path(live_run.artifacts_dir, 2, 1, token_records.PENDING)
    marker.parent.mkdir(parents=True)
    marker.touch()
    attempt = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    client = logged_in(alice)
    assert tokens_of(client, attempt)["state"] == "pending"
    write_step(live_run, 2, [attempt.rollout_key])
    marker.unlink()
    body = tokens_of(client, attempt)
    assert body["state"] == "recorded" and body["is_recorded"] is True and body["reason"] == ""
    assert body["tokens"]["token_texts"] == ["<t1>", "<t2>"]


def test_a_run_that_ended_mid_write_has_them_not_recorded(make_run, make_attempt, alice, logged_in):
    run = make_run(state="cancelled")
    marker = token_records.marker_path(run.artifacts_dir, 2, 1, token_records.PENDING)
    marker.parent.mkdir(parents=True)
    marker.touch()
    attempt = make_attempt(run, step=2, rollout_key="a1-s2-p0-r0")
    body = tokens_of(logged_in(alice), attempt)
    assert body["state"] == "not_recorded"


def test_a_failed_write_is_not_recorded_with_its_reason(live_run, make_attempt, alice, logged_in):
    failed = token_records.marker_path(live_run.artifacts_dir, 2, 1, token_records.FAILED)
    failed.parent.mkdir(parents=True)
    failed.write_text("writing them failed: OSError: [Errno 28] No space left on device")
    attempt = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    body = tokens_of(logged_in(alice), attempt)
    assert body["state"] == "not_recorded" and "No space left on device" in body["reason"]


def test_a_step_the_retention_removed_is_not_recorded(live_run, make_attempt, alice, logged_in):
    write_step(live_run, 5, ["a1-s5-p0-r0"])
    write_step(live_run, 6, ["a1-s6-p0-r0"])
    attempt = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    body = tokens_of(logged_in(alice), attempt)
    assert body["state"] == "not_recorded" and "retention" in body["reason"]


def test_an_answer_its_step_did_not_train_is_not_recorded(live_run, make_attempt, alice, logged_in):
    write_step(live_run, 2, ["a1-s2-p0-r0"])
    censored = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r1", is_censored=True, reward=None)
    body = tokens_of(logged_in(alice), censored)
    assert body["state"] == "not_recorded" and "not trained" in body["reason"]


def test_an_earlier_attempts_unwritten_step_is_not_recorded(make_run, make_attempt, alice, logged_in):
    run = make_run(state="running", attempt=2)
    write_step(run, 1, ["a1-s1-p0-r0"])
    superseded = make_attempt(run, step=2, rollout_key="a1-s2-p0-r0", run_attempt=1)
    assert tokens_of(logged_in(alice), superseded)["state"] == "not_recorded"


def test_a_resumed_attempts_step_is_not_written_yet_though_an_earlier_attempt_wrote_later_ones(
        make_run, make_attempt, alice, logged_in):
    run = make_run(state="running", attempt=2)
    for step in (1, 2, 3, 4):
        write_step(run, step, [f"a1-s{step}-p0-r0"], attempt=1)
    write_step(run, 1, ["a2-s1-p0-r0"], attempt=2)  # resumed from step 0's weights: it replays from step 1
    replayed = make_attempt(run, step=2, rollout_key="a2-s2-p0-r0", run_attempt=2)
    assert tokens_of(logged_in(alice), replayed)["state"] == "pending"


def test_an_evaluation_sample_is_not_recorded(live_run, make_attempt, alice, logged_in):
    sample = make_attempt(live_run, step=2, rollout_key="a1-eval2-p0-r0", is_evaluation=True)
    body = tokens_of(logged_in(alice), sample)
    assert body["state"] == "not_recorded" and "evaluation" in body["reason"]


def test_the_rollout_page_carries_the_words_of_both_states(live_run, make_attempt, alice, logged_in):
    attempt = make_attempt(live_run, step=2, rollout_key="a1-s2-p0-r0")
    page = logged_in(alice).get(f"/proofs/{attempt.pk}/").content.decode()
    assert "Not written yet" in page and "Not recorded, and never will be" in page
