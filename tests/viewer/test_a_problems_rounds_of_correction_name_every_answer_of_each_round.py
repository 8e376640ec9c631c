"""Rounds of correction are a tree, not a chain (issue 45): each rejected answer's retry prompt is sampled several
times, so a problem whose valid answers came in other branches was drawn as "Lean error → Lean error → format
error", and the group page listed one retry where the proof page listed two. The proof page says which branch it
draws and names, in each round, the other answers to that round's prompt; the group page lists every retry."""

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(make_run, make_attempt):
    """round 0: first (Lean error) → round 1: early (Lean error), late (valid); early → round 2: latest (format
    error), fixed (valid)."""
    run = make_run(state="running")
    first = make_attempt(run, rollout_key="a1-s1-p0-r0", round=0, step=1)

    def retry(key, parent, round_, **fields):
        return make_attempt(run, rollout_key=key, round=round_, step=round_ + 1, turn="retry", parent=parent,
                            parent_rollout_key=parent.rollout_key, **fields)

    early = retry("a1-s2-retry-p0-r0", first, 1)
    late = retry("a1-s2-retry-p0-r1", first, 1, verdict="valid", reward=1.0, lean_messages=[])
    latest = retry("a1-s3-retry-p0-r0", early, 2, verdict="", format_error="no_lean_block", lean_messages=[])
    fixed = retry("a1-s3-retry-p0-r1", early, 2, verdict="valid", reward=1.0, lean_messages=[])
    return run, first, early, late, latest, fixed


def round_item(page: str, number: int) -> str:
    return page[page.index(f'data-round="{number}">'):].split('<li class="round')[0]


def test_the_proof_page_says_which_branch_it_draws_and_names_the_other_answers_of_each_round(alice, logged_in, tree):
    run, first, early, late, latest, fixed = tree
    page = logged_in(alice).get(f"/proofs/{first.pk}/").content.decode()
    assert 'id="trajectory-branch"' in page
    assert early.rollout_key in round_item(page, 1) and latest.rollout_key in round_item(page, 2)
    assert (f'One of 2 answers to round 0\'s correction prompt: this chain follows the earliest. The other: '
            f'<a href="/proofs/{late.pk}/">{late.rollout_key}</a> (Valid).') in round_item(page, 1)
    assert f'<a href="/proofs/{fixed.pk}/">{fixed.rollout_key}</a> (Valid)' in round_item(page, 2)


def test_a_rounds_own_page_names_its_siblings_without_saying_it_was_chosen(alice, logged_in, tree):
    run, first, early, late, latest, fixed = tree
    page = logged_in(alice).get(f"/proofs/{late.pk}/").content.decode()
    assert "One of 2 answers to round 0's correction prompt. The other: " in round_item(page, 1)
    assert early.rollout_key in round_item(page, 1)


def test_the_group_page_lists_every_retry_of_an_answer(alice, logged_in, tree):
    run, first, early, late, latest, fixed = tree
    page = logged_in(alice).get(f"/proofs/{first.pk}/group/").content.decode()
    row = page[page.index(f'data-rollout-key="{first.rollout_key}"'):].split("</tr>")[0]
    assert early.rollout_key in row and late.rollout_key in row
