"""Clicking step 2 on the mismatch chart (the share of tokens whose ratio lies outside [0.5, 2]) opens step 2's
answers with such a token, read from the step's token records; the link shows the same list to the same person
in another browser, and nothing to someone the run is not shared with."""

import math

import pytest

from tests.browser.conftest import click_step, log_in, rollout_keys_seen_by, shown_keys
from trainer.observability import token_records

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def record(key: str, engine_logprob: float) -> token_records.TokenRecord:
    return token_records.TokenRecord(key, 0.5, [1], [engine_logprob], [-1.0], [1.0], [1.0], [0])


def test_step_2_on_the_mismatch_chart_opens_step_2s_answers_outside_the_bounds(page, browser, alice, charlie, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running", name="mismatch run")
    for step in range(4):
        run.step_metrics.create(step=step, values={"rollout/ratio_outside_share": 0.5 if step == 2 else 0.0})
        keys = [f"a1-s{step}-p0-r{sample}" for sample in range(2)]
        for key in keys:
            ProofAttempt.objects.create(run=run, rollout_key=key, step=step, problem_key="add_small",
                                        verdict="lean_error", reward=0.0, response=f"answer {key}")
        # Sample 0's token: π_old 3 × the engine's (outside); sample 1's: 1.2 × (inside).
        token_records.write_step_records(run.artifacts_dir, step, 1, [
            record(keys[0], -1.0 - math.log(3.0)), record(keys[1], -1.0 - math.log(1.2))], lambda ids: ["x"])
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    assert len(shown_keys(page)) == 8

    click_step(page, "ratio_outside", 2)
    page.wait_for_url(lambda url: "step=2" in url and "mismatch=outside" in url)
    page.wait_for_selector("body[data-live]")
    assert shown_keys(page) == ["a1-s2-p0-r0"]
    link = page.url

    assert rollout_keys_seen_by(browser, link, "alice") == ["a1-s2-p0-r0"]
    assert rollout_keys_seen_by(browser, link, "charlie") is None
