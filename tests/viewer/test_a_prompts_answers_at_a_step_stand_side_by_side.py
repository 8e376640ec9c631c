"""One prompt's answers at a step (its GRPO group) side by side: verdict, reward, the advantage the learner used
(from the step's token records, never a made-up 0), length, Lean's first error in one line and its retry;
sortable, linked from each of its rollouts, and shown only to those who see the run."""

import pytest

from trainer.observability import token_records

pytestmark = pytest.mark.django_db

ERROR = [{"severity": "error", "line": 2, "column": 2, "end_line": 2, "end_column": 6,
          "text": "unsolved goals\n⊢ 2 + 3 = 5"}]


def record(key: str, advantage: float) -> token_records.TokenRecord:
    return token_records.TokenRecord(key, advantage, [1, 2], [-0.5, -0.5], [-0.5, -0.5], [1.0, 1.0], [1.0, 1.0], [0, 0])


@pytest.fixture
def group(make_run, make_attempt):
    run = make_run(state="running")
    answers = [
        make_attempt(run, step=3, rollout_key="a1-s3-p1-r0", sample_index=0, verdict="valid", reward=1.0,
                     lean_messages=[], num_tokens=40),
        make_attempt(run, step=3, rollout_key="a1-s3-p1-r1", sample_index=1, verdict="lean_error", reward=0.0,
                     lean_messages=ERROR, num_tokens=90),
        make_attempt(run, step=3, rollout_key="a1-s3-p1-r2", sample_index=2, verdict="infra_error", reward=None,
                     is_censored=True, lean_messages=[], num_tokens=60),
    ]
    make_attempt(run, step=3, rollout_key="a1-s3-p11-r0", sample_index=0)  # another prompt: slot 11, not 1
    make_attempt(run, step=4, rollout_key="a1-s4-p1-r0", sample_index=0)  # the same slot at another step
    retry = make_attempt(run, step=4, rollout_key="a1-s4-retry-p0-r0", turn="retry", parent=answers[1],
                         parent_rollout_key=answers[1].rollout_key, verdict="valid", reward=1.0, lean_messages=[])
    # The censored answer was never trained: it has no record, so no advantage.
    token_records.write_step_records(run.artifacts_dir, 3, 1, [record("a1-s3-p1-r0", 0.5), record("a1-s3-p1-r1", -0.5)],
                                     lambda ids: ["x" for _ in ids])
    return run, answers, retry


def rows(client, attempt, query=""):
    response = client.get(f"/proofs/{attempt.pk}/group/{query}")
    assert response.status_code == 200, response.content
    return response.context["answers"], response.content.decode()


def test_the_group_holds_exactly_the_prompts_answers_at_that_step(group, alice, logged_in):
    _, answers, _ = group
    shown, _ = rows(logged_in(alice), answers[1])
    assert [a.attempt.rollout_key for a in shown] == ["a1-s3-p1-r0", "a1-s3-p1-r1", "a1-s3-p1-r2"]


def test_each_answer_shows_its_verdict_reward_advantage_length_error_and_retry(group, alice, logged_in):
    _, answers, retry = group
    shown, page = rows(logged_in(alice), answers[0])
    assert [a.advantage for a in shown] == [0.5, -0.5, None]
    assert shown[1].lean_error == "unsolved goals" and shown[0].lean_error == ""
    assert shown[1].retries == [retry] and shown[0].retries == []
    assert "0.5000" in page and "-0.5000" in page and "censored" in page and "unsolved goals" in page
    assert f'href="/proofs/{retry.pk}/"' in page and "⊢" not in page  # one line of Lean's error


def test_it_sorts_by_a_column_either_way_with_unknown_figures_last(group, alice, logged_in):
    _, answers, _ = group
    client = logged_in(alice)
    assert [a.attempt.sample_index for a in rows(client, answers[0], "?sort=-length")[0]] == [1, 2, 0]
    assert [a.attempt.sample_index for a in rows(client, answers[0], "?sort=advantage")[0]] == [1, 0, 2]
    assert [a.attempt.sample_index for a in rows(client, answers[0], "?sort=-advantage")[0]] == [0, 1, 2]
    assert [a.attempt.sample_index for a in rows(client, answers[0], "?sort=-reward")[0]] == [0, 1, 2]


def test_an_unknown_sort_says_which_columns_there_are(group, alice, logged_in):
    _, answers, _ = group
    response = logged_in(alice).get(f"/proofs/{answers[0].pk}/group/?sort=mood")
    assert response.status_code == 400 and b"sample, verdict, reward, advantage, length" in response.content


def test_a_step_without_records_shows_no_advantage_rather_than_zero(group, make_attempt, alice, logged_in):
    run, _, _ = group
    lone = make_attempt(run, step=5, rollout_key="a1-s5-p0-r0", reward=0.0)
    shown, page = rows(logged_in(alice), lone)
    assert [a.advantage for a in shown] == [None] and "No advantages recorded" in page


def test_every_rollout_links_to_its_group(group, alice, logged_in):
    _, answers, _ = group
    page = logged_in(alice).get(f"/proofs/{answers[2].pk}/").content.decode()
    assert f'href="/proofs/{answers[2].pk}/group/"' in page


def test_a_stranger_gets_not_found(group, charlie, logged_in):
    _, answers, _ = group
    assert logged_in(charlie).get(f"/proofs/{answers[0].pk}/group/").status_code == 404


def test_lean_s_error_and_the_problem_name_are_escaped(make_run, make_attempt, alice, logged_in):
    run = make_run(state="running")
    attempt = make_attempt(run, step=1, rollout_key="a1-s1-p0-r0", problem_name="<b>name</b>", lean_messages=[
        {"severity": "error", "line": 1, "column": 0, "text": "<script>alert(1)</script> failed"}])
    page = logged_in(alice).get(f"/proofs/{attempt.pk}/group/").content.decode()
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; failed" in page
    assert "<b>name</b>" not in page
