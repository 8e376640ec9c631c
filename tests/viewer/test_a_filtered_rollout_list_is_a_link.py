"""The rollout list's filters live in the URL: step ranges, the policy that wrote a rollout, its length and
ending, and words of the answer or of Lean's messages. A link shows its reader exactly the list its sender saw,
if the run is shared with them, and nothing otherwise."""

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollouts(make_run, make_attempt):
    run = make_run(state="running")
    made = {
        "early": make_attempt(run, step=1, policy_version=0, num_tokens=40, response="<think>try omega</think>",
                              lean_messages=[{"severity": "error", "line": 2, "column": 2, "end_line": 2,
                                              "end_column": 7, "text": "omega could not prove the goal"}]),
        "middle": make_attempt(run, step=2, policy_version=1, num_tokens=120, verdict="valid", reward=1.0,
                               response="<think>Nat.succ_le_of_lt closes it</think>", lean_messages=[]),
        "cut": make_attempt(run, step=3, policy_version=2, num_tokens=192, is_truncated=True, verdict="",
                            format_error="no_valid_think_block", response="<think>and so on and so on"),
        "late": make_attempt(run, step=4, policy_version=2, num_tokens=64, turn="retry", round=2,
                             response="<think>linarith</think>",
                             lean_messages=[{"severity": "error", "line": 3, "column": 2, "end_line": 3,
                                             "end_column": 10, "text": "linarith failed to find a contradiction"}]),
    }
    return run, made


@pytest.mark.parametrize(("query", "expected"), [
    ("step_from=2", ["late", "cut", "middle"]),
    ("step_to=2", ["middle", "early"]),
    ("step_from=2&step_to=3", ["cut", "middle"]),
    ("policy_version=2", ["late", "cut"]),
    ("round=2", ["late"]),
    ("round=0", ["cut", "middle", "early"]),
    ("min_tokens=64&max_tokens=150", ["late", "middle"]),
    ("truncated=yes", ["cut"]),
    ("truncated=no", ["late", "middle", "early"]),
    ("format_error=any", ["cut"]),
    ("text=omega", ["early"]),  # in the answer and in Lean's message
    ("text=contradiction", ["late"]),  # only in Lean's message
    ("text=Nat.succ_le_of_lt", ["middle"]),  # a Lean name, as written
    ("text=%22failed+to+find%22", ["late"]),  # a phrase
    ("text=linarith+contradiction", ["late"]),  # every word
    ("text=omega+linarith", []),
    ("text=goal+-omega", []),  # less the excluded ones
    ("text=so+-omega", ["cut"]),
    ("text=omega&step_from=2", []),
])
def test_each_new_filter_narrows_the_api_list_newest_first(rollouts, alice, logged_in, query, expected, listed_keys):
    run, made = rollouts
    assert listed_keys(logged_in(alice), run, query) == [made[name].rollout_key for name in expected]


def test_a_link_with_filters_shows_the_same_list_on_the_page_and_in_the_api(rollouts, alice, logged_in, listed_keys):
    run, made = rollouts
    client = logged_in(alice)
    query = "step_from=2&policy_version=2&text=linarith"
    page = client.get(f"/runs/{run.pk}/?{query}").content.decode()
    shown = [name for name, attempt in made.items() if attempt.rollout_key in page]
    assert shown == ["late"] == [name for name, a in made.items() if a.rollout_key in listed_keys(client, run, query)]
    assert 'value="linarith"' in page  # the form shows the filters the link carries


def test_a_link_to_a_run_not_shared_with_its_reader_shows_nothing(rollouts, bob, logged_in):
    run, made = rollouts
    client = logged_in(bob)
    assert client.get(f"/runs/{run.pk}/?text=omega").status_code == 404
    assert client.get(f"/api/proofs/runs/{run.pk}/rollouts?text=omega").status_code == 404


@pytest.mark.parametrize(("query", "field", "words"), [
    ("step_from=3&step_to=2", "step_to", "Must not be below from step (3)."),
    ("min_tokens=100&max_tokens=10", "max_tokens", "Must not be below at least tokens (100)."),
    ("truncated=maybe", "truncated", "maybe"),
])
def test_a_contradictory_or_unknown_filter_is_refused_with_what_to_fix(rollouts, alice, logged_in, query, field, words):
    run, _ = rollouts
    response = logged_in(alice).get(f"/api/proofs/runs/{run.pk}/rollouts?{query}")
    assert response.status_code == 422
    assert field in response.json()["detail"] and words in response.json()["detail"]


def test_the_text_search_is_answered_from_the_full_text_index(rollouts):
    from proofs.models import ProofAttempt
    from proofs.queries import RolloutFilters, filter_attempts

    queryset = filter_attempts(ProofAttempt.objects.all(), RolloutFilters({"text": "omega"}))
    with connection.cursor() as cursor:
        # A handful of rows would be scanned anyway; forbidding scans leaves the planner only the full-text
        # index, and only if its expression is the query's (at 100,000 rows: benchmarks/rollout_text_search.py).
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")
        sql, params = queryset.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "attempt_text_search" in plan, plan
