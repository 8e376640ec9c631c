"""A rollout that failed the format check explains itself: its raw answer, escaped, with the line
where the check failed marked, the check's own words and the release's category; and the run
page's chart draws each category's share of the step's answers."""

import time

import pytest

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATEMENT = "theorem add_small : (2 : ℕ) + 3 = 5 := by"
# The lean4 block's closing fence sits at the end of a code line: the release's strict count finds
# no block. The reasoning holds markup that must stay text.
ANSWER = (
    "<think>\nTry <script>window.pwned = 1</script> norm_num.\n```tactics\n" + STATEMENT + "\n  norm_num\n```\n"
    "Also:\n```tactics\n  norm_num\n```\n</think>\n\n```lean4\n" + STATEMENT + "\n  norm_num```"
)
STRAY_FENCE_LINE = ANSWER.split("\n").index("  norm_num```") + 1


def publish_scored_answer(run, key):
    from django.conf import settings

    from trainer.config import RewardConfig
    from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished
    from trainer.recipe.format_reward import check_format
    from trainer.recipe.problems import Problem

    check = check_format(ANSWER, Problem(problem_id="add_small", formal_statement=STATEMENT), RewardConfig())
    assert check.error is not None and check.failure_lines
    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)), first_seq=int(time.time() * 1000))
    publisher.publish(EventType.ROLLOUT_FINISHED, RolloutFinished(
        rollout_key=key, step=1, problem_id="add_small", problem_name="add_small", formal_statement=STATEMENT,
        response=ANSWER, reasoning=check.reasoning, lean_code=check.lean_code, reward=0.0,
        format_error=check.error.value, format_detail=check.detail,
        format_failure_lines=[list(lines) for lines in check.failure_lines], reasons=[f"format: {check.detail}"],
    ))


def test_a_format_failed_rollout_shows_its_raw_answer_with_the_failing_line_marked_and_the_category(page, alice, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running", name="format run")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    publish_scored_answer(run, "fmt-1")
    page.wait_for_selector('#rollouts li[data-rollout-key="fmt-1"]', timeout=5000)

    attempt = ProofAttempt.objects.get(run=run, rollout_key="fmt-1")
    page.goto(attempt.get_absolute_url())
    assert page.locator("#format-category").inner_text() == "INVALID_LEAN4_CODE_BLOCK_COUNT"
    assert "close with ``` at the start of a line" in page.locator("#format-detail").inner_text()
    assert page.locator("#raw-answer-block").get_attribute("open") is not None
    marked = page.locator("#raw-answer .format-failure-line")
    marked_numbers = marked.evaluate_all("nodes => nodes.map(n => Number(n.dataset.line))")
    assert STRAY_FENCE_LINE in marked_numbers
    stray = page.locator(f'#raw-answer .answer-line[data-line="{STRAY_FENCE_LINE}"]')
    assert "norm_num```" in stray.inner_text() and "format-failure-line" in stray.get_attribute("class")
    # The answer is text: its <script> is shown, never run.
    assert "<script>window.pwned = 1</script>" in page.locator("#raw-answer").inner_text()
    assert page.evaluate("window.pwned") is None
    assert page.locator("#raw-answer").inner_text().count("\n") >= ANSWER.count("\n")
    # No empty Lean code box: the page says why there is none.
    assert "no Lean code was extracted" in page.locator("[data-code-view=attempt]").inner_text()
    screenshot(page, "format-failure")


def test_the_format_error_chart_draws_each_categorys_share_of_the_answers(page, alice, make_run):
    run = make_run(state="running", name="format chart run")
    for step, failing in enumerate([6, 3, 1], start=1):
        run.step_metrics.create(step=step, values={"rollouts": 8, "format_errors": {"no_valid_think_block": failing}})
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    chart = page.locator("[data-chart=format_errors]")
    chart.locator("canvas").wait_for()
    assert "NO_VALID_THINK_BLOCK" in chart.locator(".u-legend").inner_text()
    assert "share of the step's answers" in chart.locator("figcaption").inner_text()
    box = chart.locator(".u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] - 1, box["y"] + box["height"] / 2)
    values = chart.locator(".u-legend .u-value").all_inner_texts()
    assert "0.125" in values  # step 3: 1 of 8 answers


def test_a_run_whose_answers_all_passed_the_format_check_says_so_instead_of_no_data(page, alice, make_run):
    run = make_run(state="succeeded", name="all well formed")
    for step in (1, 2):
        run.step_metrics.create(step=step, values={"rollouts": 4, "format_errors": {}})
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    chart = page.locator("[data-chart=format_errors]")
    page.wait_for_function("() => document.querySelector('[data-chart=format_errors]').stepChart.rows.size === 2")
    assert chart.locator(".chart-empty").inner_text() == "No answer failed the format check."
    assert chart.locator("canvas").count() == 0  # nothing to draw, and no 0 drawn for a category never seen
