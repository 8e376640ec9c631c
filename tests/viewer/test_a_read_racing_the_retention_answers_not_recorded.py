"""The retention removes a step's file while pages read (the writer's thread prunes after each step): a read that
found the file and then cannot open it answers as a read after the removal does, "not recorded (retention)" or no
figures, never a 500. Every reader of token records is covered: the tokens API, the group view, the mismatch filter
and the step's export.

The race is made to happen, not waited for: opening the step's file (pyarrow.parquet.read_table) first removes it,
as the retention's unlink would just then, and the real read then runs on the path that is gone."""

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db

PRUNED, KEPT = 2, 3


def record(key: str) -> token_records.TokenRecord:
    return token_records.TokenRecord(key, 0.5, [1, 2], [-0.5, -3.0], [-0.5, -0.5], [0.1, 0.1], [1.0, 1.0], [0, 0])


@pytest.fixture
def run_and_answer(make_run, make_attempt):
    """A live run with steps 2 and 3 written; step 2's answer is the one whose file the retention removes."""
    run = make_run(state="running")
    answer = make_attempt(run, step=PRUNED, rollout_key="a1-s2-p0-r0", sample_index=0)
    for step in (PRUNED, KEPT):
        token_records.write_step_records(run.artifacts_dir, step, 1, [record(f"a1-s{step}-p0-r0")],
                                         lambda ids: ["x"] * len(ids))
    return run, answer


@pytest.fixture
def retention_removes_it_on_opening(run_and_answer, monkeypatch):
    import pyarrow.parquet as pq

    run, _ = run_and_answer
    pruned = token_records.records_path(run.artifacts_dir, PRUNED, 1)
    real_read_table = pq.read_table

    def read_table(source, *args, **kwargs):
        if str(source) == str(pruned):
            pruned.unlink(missing_ok=True)  # the retention, between the reader's look and its open
        return real_read_table(source, *args, **kwargs)

    monkeypatch.setattr(pq, "read_table", read_table)
    return pruned


def test_the_tokens_api_says_the_retention_removed_them(run_and_answer, retention_removes_it_on_opening, alice,
                                                        logged_in):
    _, answer = run_and_answer
    response = logged_in(alice).get(f"/api/proofs/attempts/{answer.pk}/tokens")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "not_recorded" and body["tokens"] == {}
    assert "retention" in body["reason"] and "oldest kept is step 3" in body["reason"]
    assert not retention_removes_it_on_opening.exists()  # the race did happen


def test_the_group_view_shows_no_advantage(run_and_answer, retention_removes_it_on_opening, alice, logged_in):
    _, answer = run_and_answer
    response = logged_in(alice).get(f"/proofs/{answer.pk}/group/")
    assert response.status_code == 200
    assert not retention_removes_it_on_opening.exists()


def test_the_mismatch_filter_lists_nothing_of_the_removed_step(run_and_answer, retention_removes_it_on_opening,
                                                               alice, logged_in, listed_keys):
    run, _ = run_and_answer
    assert listed_keys(logged_in(alice), run, f"step={PRUNED}&mismatch=outside") == []
    assert not retention_removes_it_on_opening.exists()


def test_the_steps_export_carries_no_token_records(run_and_answer, retention_removes_it_on_opening, alice, logged_in):
    run, answer = run_and_answer
    response = logged_in(alice).get(f"/api/proofs/runs/{run.pk}/steps/{PRUNED}/rollouts/export?format=jsonl")
    assert response.status_code == 200
    assert answer.rollout_key in b"".join(response.streaming_content if response.streaming else [response.content]).decode()
    assert not retention_removes_it_on_opening.exists()
