"""Clicking a step on a run-page chart opens that step's rollouts; the page's address is the list, so the same
link in another browser shows the same rollouts to a person the run is shared with, and nothing to anyone else."""

import pytest

from tests.browser.conftest import click_step, log_in, rollout_keys_seen_by, shown_keys

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_clicking_step_2_on_the_mismatch_chart_opens_step_2s_rollouts_for_whoever_may_see_them(
        page, browser, alice, bob, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running", name="mismatch run")
    for step in range(4):
        run.step_metrics.create(step=step, values={
            "rollout/logprob_abs_diff_mean": 0.9 if step == 2 else 0.01, "rollout/logprob_abs_diff_max": 0.1})
        for sample in range(2):
            ProofAttempt.objects.create(run=run, rollout_key=f"s{step}-{sample}", step=step, problem_key="add_small",
                                        verdict="lean_error", reward=0.0, response=f"answer {sample} of step {step}")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    assert len(shown_keys(page)) == 8

    click_step(page, "logprob_gap", 2)
    page.wait_for_url(lambda url: "step=2" in url)
    page.wait_for_selector("body[data-live]")
    assert sorted(shown_keys(page)) == ["s2-0", "s2-1"]
    link = page.url

    assert rollout_keys_seen_by(browser, link, "alice") == ["s2-0", "s2-1"]
    assert rollout_keys_seen_by(browser, link, "bob") is None
