"""The rollout page of a live run's newest step says its tokens are not written yet (the step's file is written in
the background after its learner step) and draws them once the file is there, without a reload; a rollout whose
tokens never will be written says so, with the reason, and draws nothing."""

import pytest

from tests.browser.conftest import log_in
from trainer.observability import token_records

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def record(key: str) -> token_records.TokenRecord:
    return token_records.TokenRecord(rollout_key=key, advantage=0.5, token_ids=[7, 8, 9],
                                     engine_logprobs=[-0.5, -1.0, -0.25], learner_logprobs=[-0.5, -1.0, -0.2],
                                     entropies=[0.1, 0.2, 0.3], loss_weights=[1.0, 1.0, 1.0], flags=[0, 0, 0])


def live_attempt_with_marker(make_run, marker_name: str):
    """A live run's rejected answer at step 2, and its step's marker file (pending or failed), not yet made."""
    from proofs.models import ProofAttempt

    run = make_run(state="running")
    attempt = ProofAttempt.objects.create(run=run, rollout_key="a1-s2-p0-r0", step=2, problem_key="p", turn="first",
                                          verdict="lean_error", reward=0.0, num_tokens=3)
    marker = token_records.marker_path(run.artifacts_dir, 2, 1, marker_name)
    marker.parent.mkdir(parents=True)
    return run, attempt, marker


def test_tokens_being_written_are_awaited_then_drawn(page, alice, make_run):
    run, attempt, marker = live_attempt_with_marker(make_run, token_records.PENDING)
    marker.touch()
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{attempt.pk}/")
    page.wait_for_selector("#token-view[data-tokens='pending']")
    assert page.inner_text("#token-status").startswith("Not written yet")
    assert page.locator("#tokens .token").count() == 0

    token_records.write_step_records(run.artifacts_dir, 2, 1, [record(attempt.rollout_key)],
                                     lambda ids: [f"<t{i}>" for i in ids])
    marker.unlink()
    page.wait_for_selector("#token-view[data-tokens='drawn']")  # asked again by itself: no reload
    assert page.eval_on_selector_all("#tokens .token", "spans => spans.map(s => s.textContent)") == [
        "<t7>", "<t8>", "<t9>"]


def test_tokens_that_never_will_be_written_say_why(page, alice, make_run):
    _, attempt, failed = live_attempt_with_marker(make_run, token_records.FAILED)
    failed.write_text("writing them failed: OSError: [Errno 28] No space left on device")
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{attempt.pk}/")
    page.wait_for_selector("#token-view[data-tokens='none']")
    status = page.inner_text("#token-status")
    assert status.startswith("Not recorded, and never will be:") and "No space left on device" in status
