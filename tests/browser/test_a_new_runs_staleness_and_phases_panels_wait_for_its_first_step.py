"""A run with no step yet says so in its staleness, dropped-rollouts, idle and phases panels (issue 45): they said
"runs from before asynchronous RL did not measure it" of a run just launched. A run whose steps lack the figures
(one from before asynchronous RL) still says that."""

import pytest

from runs.step_phases import BEFORE_ANY_STEP
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PANELS = ["[data-chart=staleness] .chart-empty", "[data-chart=dropped_stale] .chart-empty", "[data-chart=idle] .chart-empty",
          "#phase-timeline .chart-empty"]


def panel_texts(page, run):
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    return [page.inner_text(selector) for selector in PANELS]


def test_a_run_without_a_step_says_it_has_none_and_an_old_run_says_it_did_not_measure(page, alice, make_run):
    new_run = make_run(state="running", name="just launched")
    old_run = make_run(state="succeeded", name="from before asynchronous RL")
    old_run.step_metrics.create(step=0, values={"reward/mean": 0.5})
    log_in(page, "alice", "alice-password")

    assert panel_texts(page, new_run) == [BEFORE_ANY_STEP] * len(PANELS)
    assert all("before asynchronous RL" in text for text in panel_texts(page, old_run))
