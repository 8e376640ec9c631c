"""The proof viewer's list (the run page's stored cards and ``GET /api/proofs/runs/<id>/rollouts``) gives each answer
of a later round of correction the rounds before it, round 0 first, each with its verdict in words and its page; a
first attempt has none. A page costs one query per round back, however many cards it holds."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from proofs.queries import attach_earlier_rounds

pytestmark = pytest.mark.django_db


@pytest.fixture
def chain(make_run, make_attempt):
    run = make_run(state="running")
    first = make_attempt(run, rollout_key="a1-s1-p0-r0", round=0, verdict="lean_error")
    second = make_attempt(run, rollout_key="a1-s2-retry-p0-r1", round=1, turn="retry", parent=first,
                          parent_rollout_key=first.rollout_key, verdict="", reward=0.0, format_error="no_lean_block")
    third = make_attempt(run, rollout_key="a1-s3-retry-p0-r0", round=2, turn="retry", parent=second,
                         parent_rollout_key=second.rollout_key, verdict="valid", reward=1.0)
    return run, [first, second, third]


def test_the_api_gives_a_later_round_its_earlier_rounds_and_a_first_attempt_none(alices_client, chain):
    run, (first, second, third) = chain
    cards = {card["rollout_key"]: card for card in
             alices_client.get(f"/api/proofs/runs/{run.pk}/rollouts").json()["rollouts"]}
    assert cards[first.rollout_key]["earlier_rounds"] == []
    assert [(r["round"], r["rollout_key"], r["attempt_id"], r["label"]) for r in
            cards[third.rollout_key]["earlier_rounds"]] == [
        (0, first.rollout_key, first.pk, "Lean error"), (1, second.rollout_key, second.pk, "no_lean_block")]


def test_the_run_page_draws_the_stored_trajectory_in_the_later_rounds_card(alices_client, chain):
    run, (first, second, third) = chain
    page = alices_client.get(f"/runs/{run.pk}/").content.decode()
    card = page[page.index(f'data-rollout-key="{third.rollout_key}" data-round="2"'):].split('<li class="rollout ')[0]
    assert 'class="round-trajectory"' in card
    assert f'href="/proofs/{first.pk}/">round 0</a> <span class="round-verdict">Lean error</span>' in card
    assert f'href="/proofs/{second.pk}/">round 1</a> <span class="round-verdict">no_lean_block</span>' in card
    assert '<span class="round-name">round 2</span> <span class="round-verdict">Valid</span>' in card


def test_a_page_of_many_chains_costs_one_query_per_round_back(make_run, make_attempt):
    run = make_run(state="running")
    latest = []
    for chain in range(20):
        parent = None
        for round_ in range(4):
            parent = make_attempt(run, rollout_key=f"c{chain}-r{round_}", round=round_, parent=parent,
                                  parent_rollout_key=parent.rollout_key if parent else "")
        latest.append(parent)
    with CaptureQueriesContext(connection) as queries:
        attach_earlier_rounds(latest)
    assert len(queries) == 3
    assert all([r["round"] for r in attempt.earlier_rounds] == [0, 1, 2] for attempt in latest)
