"""A problem's history as people read it (issue 47), in Chromium at 1,400 and 390 px: the problem page's solve rate,
chart, runs and verified proofs, and a version's problem table sorted and filtered from the URL, each number equal
to the API's. The rollouts reach the history the real way: published to the runs' streams, stored by the
platform's own ingester. Their verdicts are the stand-in Lean server's, and the pages say so.

Screenshots: test-artifacts/screenshots/problem-history-*.png."""

import re

import pytest

from proofs.models import ProblemHistory
from tests.browser.conftest import log_in, screenshot
from tests.browser.test_tables_stay_legible_on_a_phone_and_row_numbers_never_wrap_on_a_desktop import (
    WORDS_BROKEN_ACROSS_LINES,
)
from tests.runs.event_helpers import publisher_for, rollout, wait_for
from trainer.observability.events import EventType

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WIDTHS = (1400, 390)
STATEMENTS = {"add_small": "theorem add_small : (2 : ℕ) + 3 = 5 := by",
              "mul_small": "theorem mul_small : (6 : ℤ) * 7 = 42 := by"}


def publish_group(publisher, step, key, rewards):
    for sample, reward in enumerate(rewards):
        publisher.publish(EventType.ROLLOUT_FINISHED, rollout(
            step=step, key=f"s{step}-{key}-r{sample}", problem_id=key, problem_name=key,
            formal_statement=STATEMENTS[key], reward=reward, verdict="valid" if reward else "lean_error"))


@pytest.fixture
def tried(platform_processes, alice, make_run):
    """Two runs of alice's on the demo promptset, their answers stored by the ingester: add_small solved at some
    steps, mul_small attempted and never solved, lt_small never attempted."""
    first, second = make_run(state="starting", name="first try"), make_run(state="starting", name="second try")
    publish_group(publisher_for(first), 1, "add_small", [1.0, 0.0, 0.0, 0.0])
    publish_group(publisher_for(first), 2, "add_small", [1.0, 1.0, 0.0, 0.0])
    publish_group(publisher_for(second), 1, "add_small", [1.0, 1.0, 1.0, 0.0])
    publish_group(publisher_for(second), 1, "mul_small", [0.0, 0.0])
    wait_for(lambda: sum(row.answers for row in ProblemHistory.objects.all()) == 14, what="the ingester's history")
    return first, second


def api(page, path):
    response = page.request.get(path)
    assert response.ok, f"{path}: {response.status} {response.text()}"
    return response.json()


def as_shown(value) -> str:
    """A rate as the pages write it (the `measured` filter): '0.333', '1', '–' when not measured."""
    if value is None:
        return "–"
    return str(int(value)) if float(value).is_integer() else f"{value:.3f}"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_problem_page_shows_the_apis_history(browser, platform_processes, tried, promptset_version, width):
    first, second = tried
    problem = promptset_version.problems.get(problem_key="add_small")
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        log_in(page, "alice", "alice-password")
        history = api(page, f"/api/promptsets/{problem.promptset_id}/problems/{problem.pk}/history")
        page.goto(problem.get_absolute_url())
        screenshot(page, f"problem-history-{width}px")

        assert (history["first_attempts_accepted"], history["first_attempts_scored"]) == (6, 12)
        win_rate = page.locator("#platform-win-rate").inner_text()
        assert win_rate.startswith(f"{as_shown(history['solve_rate'])} (6 of 12 scored first attempts"), win_rate
        assert "the stand-in's win rate, not real Lean's" in win_rate

        # The chart: one line per run, one point per step, at the API's solve rates.
        for series in history["series"]:
            drawn = page.eval_on_selector_all(
                f"#solve-rate-chart g[data-run-id='{series['run_id']}'] circle",
                "points => points.map(p => [Number(p.dataset.step), Number(p.dataset.solveRate)])")
            assert drawn == [[point["step"], pytest.approx(point["solve_rate"])] for point in series["points"]]
        assert {s["run_id"] for s in history["series"]} == {first.pk, second.pk}
        chart_width = page.eval_on_selector("#solve-rate-chart svg", "svg => svg.getBoundingClientRect().width")
        assert 0 < chart_width <= width

        # The runs that tried it, newest first, each cell the API's.
        rows = page.locator("#runs-that-tried tbody tr")
        assert rows.count() == len(history["runs"]) == 2
        for index, run in enumerate(history["runs"]):
            cells = rows.nth(index).locator("td").all_inner_texts()
            assert cells[0].startswith(run["run_name"])
            assert cells[1] == "the stand-in, not Lean"
            assert cells[2:7] == [str(run["first_answers"]), str(run["first_scored"]), str(run["first_accepted"]),
                                  str(run["first_censored"]), as_shown(run["first_solve_rate"])]
            assert cells[9:11] == [str(run["first_solved_step"]), str(run["last_solved_step"])]

        # Its verified proofs, one click from the rollout.
        links = page.locator("#verified-proofs a")
        assert links.count() == len(history["verified_proofs"]) == 6
        links.first.click()
        page.wait_for_url(re.compile(re.escape(history["verified_proofs"][0]["url"]) + "$"))

        assert page.evaluate(WORDS_BROKEN_ACROSS_LINES, "#runs-that-tried td, #runs-that-tried th") == []
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), \
            f"the problem page scrolls sideways at {width} px"
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_versions_problem_table_sorts_and_filters_from_the_url_as_the_api_does(browser, platform_processes, tried,
                                                                                 promptset_version, width):
    promptset_id = promptset_version.promptset_id
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))

    def shown_rows():
        return page.eval_on_selector_all("#problem-table tbody tr", """rows => rows.map(row => [
            row.querySelector('.problem-key').innerText,
            row.querySelector('[data-column=attempts]').innerText,
            row.querySelector('[data-column=solve_rate]').innerText,
            row.querySelector('[data-column=never_solved]').innerText])""")

    def api_rows(query):
        return [[row["problem_key"], str(row["attempts"]), as_shown(row["solve_rate"]),
                 "never solved" if row["is_never_solved"] else ("no" if row["attempts"] else "—")]
                for row in api(page, f"/api/promptsets/{promptset_id}/versions/1/problems?{query}")]

    try:
        log_in(page, "alice", "alice-password")
        page.goto(f"/promptsets/{promptset_id}/versions/1/?sort=-solve_rate")
        screenshot(page, f"problem-history-table-{width}px")
        assert shown_rows() == api_rows("sort=-solve_rate") == [
            ["add_small", "12", "0.500", "no"], ["mul_small", "2", "0", "never solved"], ["lt_small", "0", "–", "—"]]
        assert "stand-in Lean server" in page.locator("#problem-table-verifier").inner_text()

        # The header sorts by its column (most attempts first), and says so in the URL.
        page.click("#problem-table thead a[aria-label='Sort by attempts']")
        page.wait_for_url(re.compile(r"sort=-attempts"))
        assert shown_rows() == api_rows("sort=-attempts")
        assert [row[0] for row in shown_rows()] == ["add_small", "mul_small", "lt_small"]

        # The filter, kept with the sort in the URL.
        page.select_option("#problem-table-query select[name=show]", "never_solved")
        page.click("#problem-table-query button[type=submit]")
        page.wait_for_url(re.compile(r"show=never_solved"))
        assert "sort=-attempts" in page.url
        assert shown_rows() == api_rows("sort=-attempts&show=never_solved") == [["mul_small", "2", "0", "never solved"]]

        broken = page.evaluate(WORDS_BROKEN_ACROSS_LINES.replace("closest('table').className", "id"),
                               "#problem-table td, #problem-table th, #problem-table-query button")
        assert broken == [], f"words break inside themselves at {width} px: {broken}"
        assert page.evaluate("document.documentElement.scrollWidth <= innerWidth"), \
            f"the version page scrolls sideways at {width} px"
        assert not errors, errors
    finally:
        context.close()
