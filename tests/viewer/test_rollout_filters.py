"""The proof viewer's filters: the page and the API narrow the list alike, newest first, page by page."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def rollouts(make_run, make_attempt):
    run = make_run(state="running")
    made = {
        "accepted": make_attempt(run, step=1, verdict="valid", reward=1.0, lean_messages=[]),
        "rejected": make_attempt(run, step=1, verdict="lean_error", reward=0.0),
        "format": make_attempt(run, step=2, verdict="", reward=0.0, format_error="no_valid_think_block", lean_messages=[]),
        "censored": make_attempt(run, step=2, verdict="infra_error", reward=None, is_censored=True,
                                 reasons=["the stand-in cannot decide this statement"], problem_key="mul_small"),
        "retry": make_attempt(run, step=3, turn="retry", verdict="valid", reward=1.0, problem_key="mul_small"),
    }
    return run, made


@pytest.mark.parametrize(("query", "expected"), [
    ("", ["retry", "censored", "format", "rejected", "accepted"]),
    ("step=2", ["censored", "format"]),
    ("turn=retry", ["retry"]),
    ("verdict=valid", ["retry", "accepted"]),
    ("verdict=none", ["format"]),
    ("format_error=no_valid_think_block", ["format"]),
    ("problem=mul_small", ["retry", "censored"]),
    ("reward=1", ["retry", "accepted"]),
    ("reward=0", ["format", "rejected"]),
    ("reward=censored", ["censored"]),
    ("step=1&verdict=valid", ["accepted"]),
])
def test_each_filter_narrows_the_api_list_newest_first(rollouts, alice, logged_in, query, expected, listed_keys):
    run, made = rollouts
    assert listed_keys(logged_in(alice), run, query) == [made[name].rollout_key for name in expected]


def test_the_list_pages_back_with_before(rollouts, alice, logged_in, listed_keys):
    run, made = rollouts
    client = logged_in(alice)
    first = client.get(f"/api/proofs/runs/{run.pk}/rollouts?limit=2").json()
    assert [r["rollout_key"] for r in first["rollouts"]] == [made["retry"].rollout_key, made["censored"].rollout_key]
    rest = listed_keys(client, run, f"limit=10&before={first['next_before']}")
    assert rest == [made[name].rollout_key for name in ("format", "rejected", "accepted")]


def test_the_api_refuses_a_bad_filter_and_says_which(rollouts, alice, logged_in):
    run, _ = rollouts
    response = logged_in(alice).get(f"/api/proofs/runs/{run.pk}/rollouts?verdict=maybe")
    assert response.status_code == 422
    assert "verdict" in response.json()["detail"] and "maybe" in response.json()["detail"]


def test_the_run_page_renders_only_the_filtered_rollouts(rollouts, alice, logged_in):
    run, made = rollouts
    page = logged_in(alice).get(f"/runs/{run.pk}/?reward=censored").content.decode()
    assert made["censored"].rollout_key in page
    assert made["accepted"].rollout_key not in page and made["retry"].rollout_key not in page


def test_the_run_page_shows_a_bad_filter_as_a_form_error_not_a_crash(rollouts, alice, logged_in):
    run, _ = rollouts
    response = logged_in(alice).get(f"/runs/{run.pk}/?step=minus-one")
    assert response.status_code == 400  # an error, not an empty list of rollouts
    assert "step: Enter a whole number." in response.content.decode()
    assert "No rollouts yet" not in response.content.decode()
