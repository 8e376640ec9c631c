"""In Chromium, the launch page says before the launch what will not work (issue 45): choosing the cpu-smoke preset
for a promptset its model does not know draws the warning above the summary, naming the problems, and choosing
cpu-demo takes it away; an evaluation's summary lists no training schedule. The page only draws what
``GET /api/runs/launch-summary`` says (tests/runs hold the wording)."""

import pytest

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

WARNINGS = "#launch-warnings"


def summary_labels(page) -> list[str]:
    return page.locator("#launch-summary-rows dt").all_inner_texts()


def test_the_smoke_presets_warning_appears_for_another_promptset_and_goes_with_another_preset(
        page, alice, promptset_version):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    page.select_option("#id_promptset_version", str(promptset_version.pk))
    page.select_option("#id_preset", "cpu-smoke")
    page.wait_for_selector(f"{WARNINGS} li")
    said = page.locator(WARNINGS).inner_text()
    assert "knows answers only to the smoke promptset's problems" in said
    for key in promptset_version.entries.values_list("problem__problem_key", flat=True):
        assert key in said

    page.select_option("#id_preset", "cpu-demo")
    page.wait_for_selector(WARNINGS, state="hidden")
    assert page.locator(f"{WARNINGS} li").count() == 0


def test_an_evaluations_summary_drops_the_training_rows_when_kind_eval_is_chosen(page, alice, promptset_version):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    page.select_option("#id_preset", "cpu-smoke")
    page.wait_for_function("() => document.getElementById('launch-summary-status').textContent"
                           ".startsWith('The cpu-smoke preset with the values above')")
    assert "Training steps" in summary_labels(page)
    page.select_option("#id_kind", "eval")
    page.wait_for_function("() => [...document.querySelectorAll('#launch-summary-rows dt')]"
                           ".some((label) => label.textContent === 'Samples per problem')")
    labels = summary_labels(page)
    assert "Training steps" not in labels and "Learning rate" not in labels
