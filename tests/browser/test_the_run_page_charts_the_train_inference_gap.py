"""The run page charts each step's train–inference gap (trainer/observability/gap.py) from the stored metrics."""

import pytest

from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def gap(step):
    # Step 2 is a missed weight push: the gap jumps.
    return {"rollout/logprob_abs_diff_mean": 0.9 if step == 2 else 0.01 * (step + 1),
            "rollout/logprob_abs_diff_max": 4.0 if step == 2 else 0.1, "rollout/ratio_outside_share": 0.4 if step == 2 else 0.0}


def test_the_gap_charts_draw_each_steps_mean_max_and_share_outside_the_ratio_bounds(page, alice, make_run):
    run = make_run(state="running", name="gap run")
    for step in range(4):
        run.step_metrics.create(step=step, values={"reward/mean": 0.0, **gap(step)})
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    drawn = page.evaluate("name => document.querySelector(`[data-chart=${name}]`)?.stepChart?.plot?.data ?? null", "logprob_gap")
    assert drawn[0] == [0, 1, 2, 3]
    assert drawn[1] == pytest.approx([gap(step)["rollout/logprob_abs_diff_mean"] for step in range(4)])
    assert drawn[2] == pytest.approx([gap(step)["rollout/logprob_abs_diff_max"] for step in range(4)])
    share = page.evaluate("name => document.querySelector(`[data-chart=${name}]`)?.stepChart?.plot?.data ?? null", "ratio_outside")
    assert share[1] == pytest.approx([0.0, 0.0, 0.4, 0.0])
    assert "Train–inference gap" in page.locator("[data-chart=logprob_gap] figcaption").inner_text()
