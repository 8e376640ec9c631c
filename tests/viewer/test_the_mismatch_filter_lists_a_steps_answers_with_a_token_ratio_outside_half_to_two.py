"""?step=N&mismatch=outside lists step N's answers with a token whose engine/π_old ratio lies outside [0.5, 2],
read from the step's token records (what the mismatch chart's click opens); without a step it says what to add."""

import math

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db


def record(key: str, engine: list[float]) -> token_records.TokenRecord:
    return token_records.TokenRecord(key, 0.5, [1] * len(engine), engine, [-1.0] * len(engine), [1.0] * len(engine),
                                     [1.0] * len(engine), [0] * len(engine))


@pytest.fixture
def step_two(make_run, make_attempt):
    run = make_run(state="running")
    for key in ("a1-s2-p0-r0", "a1-s2-p0-r1", "a1-s2-p0-r2", "a1-s3-p0-r0"):
        make_attempt(run, step=int(key[4]), rollout_key=key)
    token_records.write_step_records(run.artifacts_dir, 2, 1, [
        record("a1-s2-p0-r0", [-1.0, -1.0 - math.log(2.5)]),  # π_old 2.5 × the engine's: outside
        record("a1-s2-p0-r1", [-1.0, -1.0 + math.log(1.5)]),  # 1 / 1.5: inside
        record("a1-s2-p0-r2", [-1.0 + math.log(3.0), -1.0]),  # 1 / 3: outside
    ], lambda ids: ["x"] * len(ids))
    token_records.write_step_records(run.artifacts_dir, 3, 1, [record("a1-s3-p0-r0", [-5.0])], lambda ids: ["x"])
    return run


def test_only_the_steps_answers_with_a_ratio_outside_are_listed(step_two, alice, logged_in, listed_keys):
    assert sorted(listed_keys(logged_in(alice), step_two, "step=2&mismatch=outside")) == ["a1-s2-p0-r0", "a1-s2-p0-r2"]


def test_the_run_page_lists_the_same_answers(step_two, alice, logged_in):
    page = logged_in(alice).get(f"/runs/{step_two.pk}/?step=2&mismatch=outside").content.decode()
    assert 'data-rollout-key="a1-s2-p0-r0"' in page and 'data-rollout-key="a1-s2-p0-r2"' in page
    assert 'data-rollout-key="a1-s2-p0-r1"' not in page and 'data-rollout-key="a1-s3-p0-r0"' not in page


def test_a_step_without_records_lists_nothing(step_two, alice, logged_in, listed_keys):
    assert listed_keys(logged_in(alice), step_two, "step=4&mismatch=outside") == []


def test_without_a_step_it_says_to_choose_one(step_two, alice, logged_in):
    response = logged_in(alice).get(f"/api/proofs/runs/{step_two.pk}/rollouts?mismatch=outside")
    assert response.status_code == 422 and "Choose a step too" in response.json()["detail"]
