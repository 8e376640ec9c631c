"""An engine that gives no log-probabilities leaves nothing to compare π_old with: the rollout's count of tokens
with a ratio outside [0.5, 2] is not measured, stored and served as null, never as 0 (which would claim it was
measured and found fine), and the mismatch filter does not list it."""

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db

UNMEASURED, MEASURED = "a1-s2-p0-r0", "a1-s2-p0-r1"


def record(key: str, engine_logprobs) -> token_records.TokenRecord:
    return token_records.TokenRecord(key, 0.5, [1, 2], engine_logprobs, [-1.0, -1.0], [0.1, 0.1], [1.0, 1.0], [0, 0])


@pytest.fixture
def run_with_an_unmeasured_rollout(make_run, make_attempt):
    run = make_run(state="running")
    for key in (UNMEASURED, MEASURED):
        make_attempt(run, step=2, rollout_key=key)
    token_records.write_step_records(run.artifacts_dir, 2, 1, [
        record(UNMEASURED, None),
        record(MEASURED, [-1.0, -3.0]),  # π_old e² ≈ 7.4 × the engine's at the second token: outside
    ], lambda ids: ["x"] * len(ids))
    return run


def test_a_record_without_engine_logprobs_counts_no_tokens_either_way():
    assert record(UNMEASURED, None).ratio_outside_tokens() is None
    assert record(MEASURED, [-1.0, -1.0]).ratio_outside_tokens() == 0


def test_the_steps_file_stores_it_as_not_measured(run_with_an_unmeasured_rollout):
    summary = token_records.read_step_summary(run_with_an_unmeasured_rollout.artifacts_dir, 2, 1)
    assert summary[UNMEASURED]["ratio_outside_tokens"] is None
    assert summary[MEASURED]["ratio_outside_tokens"] == 1


def test_the_api_serves_it_as_null(run_with_an_unmeasured_rollout, alice, logged_in):
    attempt = run_with_an_unmeasured_rollout.proof_attempts.get(rollout_key=UNMEASURED)
    body = logged_in(alice).get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()
    assert body["is_recorded"] is True and body["ratio_outside_tokens"] is None
    assert body["tokens"]["engine_logprob"] == [None, None]


def test_the_mismatch_filter_lists_only_the_measured_rollout_outside(run_with_an_unmeasured_rollout, alice, logged_in,
                                                                     listed_keys):
    listed = listed_keys(logged_in(alice), run_with_an_unmeasured_rollout, "step=2&mismatch=outside")
    assert listed == [MEASURED]
