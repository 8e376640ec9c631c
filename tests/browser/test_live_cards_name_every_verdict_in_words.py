"""A rollout card that arrives live names its verdict and its turn in the same words as a stored one: the
labels come with the page (run-context, from trainer/verification/verdicts.py), not from a JavaScript
copy of the list, which had lost ``rejected`` and showed the raw code."""

import pytest

from tests.browser.conftest import log_in
from tests.browser.test_proof_viewer_in_chromium import publish_rollout
from trainer.verification.verdicts import Turn, Verdict

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_live_rejected_retry_reads_rejected_by_an_integrity_rule_and_retry(page, alice, make_run):
    run = make_run(state="running", name="watched run")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")

    publish_rollout(run, "live-rejected", verdict="rejected", reward=0.0, turn="retry",
                    reasons=["uses a forbidden construct"])
    card = page.wait_for_selector('#rollouts li[data-rollout-key="live-rejected"]', timeout=5000)
    assert card.query_selector(".verdict").inner_text() == Verdict.REJECTED.label == "Rejected by an integrity rule"
    assert f"· {Turn.RETRY.label} ·" in card.inner_text()
