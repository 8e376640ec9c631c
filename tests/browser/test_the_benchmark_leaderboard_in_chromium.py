"""The benchmark page in Chromium: a stand-in row ranked apart from a published row, each labelled, and the
solved matrix between two checkpoints of one run, its cells leading to the samples."""

import re

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.evaluations.leaderboard_cast import two_checkpoint_evaluations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_leaderboard_shows_a_standin_row_apart_from_a_published_row(page, alice):
    benchmark, _, _, _ = two_checkpoint_evaluations(alice)
    log_in(page, "alice", "alice-password")
    page.goto("/benchmarks/")
    page.click("text=miniF2F-test")
    page.wait_for_url(re.compile(rf"/benchmarks/{benchmark.pk}/$"))
    published = page.locator("#leaderboard tr.published-row", has_text="Kimina-Prover-Distill-1.7B").first
    assert "published, not measured here" in published.inner_text()
    assert "0.7295" in published.inner_text()
    standin = page.locator("#standin-leaderboard tr.standin-row")
    assert standin.count() == 2 and "stand-in (not Lean)" in standin.first.inner_text()
    assert page.locator("#leaderboard tr.standin-row").count() == 0  # never mixed with Lean's or the papers'
    screenshot(page, "benchmark-leaderboard")


def test_the_matrix_says_what_checkpoint_two_newly_solved_and_lost_and_links_to_the_samples(page, alice):
    benchmark, _, problems, (first, second) = two_checkpoint_evaluations(alice)
    log_in(page, "alice", "alice-password")
    page.goto(f"/benchmarks/{benchmark.pk}/")
    page.select_option("select[name=before]", f"{first.pk}:0")
    page.select_option("select[name=after]", f"{second.pk}:0")
    page.click("#difference-choice button[type=submit]")
    page.wait_for_url(re.compile(r"after="))
    assert page.locator("#difference .newly-solved").all_inner_texts() == [problems[1].problem_key]
    assert page.locator("#difference .lost").all_inner_texts() == [problems[0].problem_key]
    row = page.locator(f"#solved-matrix tr[data-problem='{problems[0].problem_key}']")
    assert [cell.strip() for cell in row.locator("td.cell").all_inner_texts()] == ["solved", "failed"]
    screenshot(page, "benchmark-solved-matrix")
    row.locator("td.cell a").first.click()
    page.wait_for_url(re.compile(rf"/runs/{first.pk}/\?problem="))
    # The evaluation's page: its pass@k curve, and its samples of that problem in the proof viewer.
    assert page.locator("#pass-at-k svg polyline[data-family='pass_at_k']").count() == 1
    assert page.locator("#rollouts > li").count() == 2
    screenshot(page, "evaluation-run-page")
