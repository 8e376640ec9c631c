"""Tables stay legible (issue 45): at 390 px no word of a table breaks inside itself (an id every two characters,
"Copies" one letter a line, a header torn apart, a time read "10:29:3 / 1 UTC") and the page never scrolls
sideways, a wide table scrolling in its own box instead; at 1,400 px a row number (10 and up) stays on one line.

Screenshots: test-artifacts/screenshots/legible-*.png."""

import pytest

from promptsets.models import Promptset
from tests.browser.conftest import log_in, screenshot
from tests.evaluations.leaderboard_cast import two_checkpoint_evaluations

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE_WIDTH = 390
DESKTOP_WIDTH = 1400

# Every word of the cells matched, with the lines it is drawn on: a word drawn on two lines broke inside itself.
# A word here ends at a space or just after a hyphen ("Kimina-Prover-RL" may wrap as "Kimina-Prover-" / "RL", as
# type has always wrapped); an id ("mathd_algebra_478"), a number or a time never has a place to break.
WORDS_BROKEN_ACROSS_LINES = """(selector) => {
    const broken = [];
    for (const cell of document.querySelectorAll(selector)) {
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            if (node.parentElement.closest('.visually-hidden')) continue;  // read aloud, never drawn
            for (const word of node.textContent.matchAll(/[^\\s-]+-?|-/g)) {
                const range = document.createRange();
                range.setStart(node, word.index);
                range.setEnd(node, word.index + word[0].length);
                const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
                if (lines.size > 1) broken.push(`${cell.closest('table').className} ${cell.tagName}: ${word[0]}`);
            }
        }
    }
    return broken;
}"""


@pytest.fixture
def cast(alice):
    """miniF2F-test (244 problems, so row numbers past 10 and the real ids) with a run and two evaluations on it."""
    benchmark, trained, _, evaluations = two_checkpoint_evaluations(alice)
    return benchmark, trained, evaluations


def page_at(browser, platform_processes, width):
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    log_in(page, "alice", "alice-password")
    return context, page, errors


def test_at_390_px_no_table_word_breaks_and_no_page_scrolls_sideways(browser, platform_processes, cast):
    benchmark, trained, _ = cast
    promptset = Promptset.objects.get(pk=benchmark.version.promptset_id)
    context, phone, errors = page_at(browser, platform_processes, PHONE_WIDTH)
    try:
        for name, address in (("promptset", promptset.get_absolute_url()),
                              ("version", benchmark.version.get_absolute_url()),
                              ("runs-list", "/runs/"),
                              ("leaderboard", f"/benchmarks/{benchmark.pk}/")):
            phone.goto(address)
            phone.wait_for_load_state("networkidle")
            screenshot(phone, f"legible-390px-{name}")
            broken = phone.evaluate(WORDS_BROKEN_ACROSS_LINES, "main table td, main table th")
            assert broken == [], f"words break inside themselves on the {name} page at {PHONE_WIDTH} px: {broken}"
            assert phone.evaluate("document.documentElement.scrollWidth <= innerWidth"), \
                f"the {name} page scrolls sideways at {PHONE_WIDTH} px"
        assert not errors, errors
    finally:
        context.close()


def test_at_1400_px_a_row_number_stays_on_one_line(browser, platform_processes, cast):
    benchmark, _, _ = cast
    context, desktop, errors = page_at(browser, platform_processes, DESKTOP_WIDTH)
    try:
        desktop.goto(benchmark.version.get_absolute_url())
        screenshot(desktop, "legible-1400px-version")
        numbers = desktop.locator("table.problems tbody tr td:first-child")
        assert numbers.count() == 50 and numbers.nth(49).inner_text() == "50"
        broken = desktop.evaluate(WORDS_BROKEN_ACROSS_LINES, "table.problems tbody tr td:first-child")
        assert broken == [], f"row numbers wrap at {DESKTOP_WIDTH} px: {broken}"
        assert not errors, errors
    finally:
        context.close()


def test_at_1400_px_the_runs_list_shows_every_column_and_an_evaluations_pass_at_k_once_its_script_has_run(
        browser, platform_processes, cast):
    _, trained, evaluations = cast
    context, desktop, errors = page_at(browser, platform_processes, DESKTOP_WIDTH)
    try:
        desktop.goto("/runs/")
        desktop.wait_for_load_state("networkidle")  # runs.js has redrawn every row from the summaries
        screenshot(desktop, "legible-1400px-runs-list")
        for evaluation in evaluations:  # one of three problems solved within two samples: pass@2 = 1/3
            row = desktop.locator(f"tr[data-run-id='{evaluation.pk}']")
            assert row.locator("td.reward .value").inner_text() == "pass@2 0.333"
            assert row.locator("td.kind").inner_text() == "Evaluation (pass@k; no training)"
        assert desktop.locator(f"tr[data-run-id='{trained.pk}'] td.reward .value").inner_text() == "–"
        # The Kind column costs no sideways scrolling on a desktop: every column is on screen.
        assert desktop.evaluate("(box => box.scrollWidth <= box.clientWidth)(document.querySelector('.table-scroll'))")
        assert not errors, errors
    finally:
        context.close()


def test_the_statement_column_shows_the_theorem_not_its_docstring(browser, platform_processes, cast):
    benchmark, _, _ = cast
    context, desktop, errors = page_at(browser, platform_processes, DESKTOP_WIDTH)
    try:
        desktop.goto(benchmark.version.get_absolute_url())
        statements = desktop.locator("table.problems .statement-preview").all_inner_texts()
        assert statements and all(text.startswith("theorem ") for text in statements), statements[:3]
    finally:
        context.close()
