"""rollout.lean_tool_calls: an answer that asks Lean inside its reasoning is drawn as it happens (the call, then
"waiting for Lean…", then Lean's reply, in the reasoning of its "Writing now" card) and as stored (each call with
its verdict, its reply and when it was answered, in the stored card and on the proof's page). Model output is
text, never markup.

The answer is scripted (each stage on cue) but travels the real live path: trainer.observability.live's LiveRollouts and
RedisLiveSink, Redis pub/sub, the forwarder, Channels, the page; the stored rollout the real ingester's."""

import time

import pytest

from tests.browser.conftest import log_in
from tests.browser.test_a_writing_card_draws_think_and_lean_blocks_as_they_form import ScriptedAnswer, card_of, KEY
from tests.browser.test_proof_viewer_in_chromium import publish_rollout

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATEMENT = "theorem add_small : (2 : ℕ) + 3 = 5 := by"
CALL = "<think>\nFirst ask Lean.\n<lean>\n" + STATEMENT + "\n  norm_num -- <b>bold?</b>\n</lean>"
REPLY = "\n<lean_result>\nLean accepts this snippet: no errors.\n</lean_result>\n"
ANSWER = CALL + REPLY + "norm_num\n</think>\n```lean4\n" + STATEMENT + "\n  norm_num\n```"


def test_the_call_waits_for_lean_then_shows_its_reply_then_is_kept_with_the_stored_answer(page, alice, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running", name="tool run")
    answer = ScriptedAnswer(run)
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    card = card_of(page)

    answer.write(CALL, 40)
    card.locator(".tool-waiting").wait_for(timeout=10_000)
    assert card.locator(".tool-waiting").inner_text() == "waiting for Lean…"
    assert card.locator(".tool-call .tool-label").inner_text() == "Asks Lean"
    assert "norm_num -- <b>bold?</b>" in card.locator(".tool-call pre").inner_text()
    assert card.locator("b").count() == 0

    answer.write(CALL + REPLY + "norm_num", 60)  # Lean answered; the model goes on
    card.locator(".tool-reply").wait_for(timeout=10_000)
    assert card.locator(".tool-waiting").count() == 0
    assert card.locator(".tool-reply pre").inner_text() == "Lean accepts this snippet: no errors."

    answer.live.finish(0, 1, ANSWER, 90)
    asked = time.time() - 2.5
    publish_rollout(run, KEY, step=3, response=ANSWER, reasoning=ANSWER.split("</think>")[0][len("<think>"):],
                    lean_code=STATEMENT + "\n  norm_num", verdict="valid", reward=1.0, tool_calls=[{
                        "snippet": STATEMENT + "\n  norm_num -- <b>bold?</b>", "reply": REPLY, "verdict": "valid",
                        "is_decided": True, "is_standin_verdict": True, "asked_at": asked,
                        "answered_at": asked + 1.25, "reply_tokens": [30, 45]}])
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"][data-state=stored] ol.tool-calls')
    stored = card.locator("ol.tool-calls > li")
    assert stored.count() == 1
    assert "Valid" in stored.locator(".tool-label").inner_text()
    assert "answered in 1.25 s" in stored.locator(".tool-label").inner_text()
    assert stored.locator("pre.tool-reply").inner_text().startswith("<lean_result>")

    deadline = time.monotonic() + 10
    while not ProofAttempt.objects.filter(run=run, rollout_key=KEY).exists():
        assert time.monotonic() < deadline, "the ingester never stored the rollout"
        time.sleep(0.1)
    attempt = ProofAttempt.objects.get(run=run, rollout_key=KEY)
    assert attempt.tool_calls[0]["answered_at"] == pytest.approx(asked + 1.25)
    page.goto(f"/proofs/{attempt.pk}/")
    section = page.locator("#tool-calls")
    assert "Lean asked inside the reasoning (1)" in section.locator("h2").inner_text()
    assert "norm_num -- <b>bold?</b>" in section.locator("pre.lean-code").inner_text()
    assert section.locator("b").count() == 0
    assert "Lean accepts this snippet: no errors." in section.locator("pre.tool-reply").inner_text()


def test_a_call_lean_could_not_decide_says_so_as_stored(page, alice, make_run):
    run = make_run(state="running", name="undecided tool run")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    reply = "\n<lean_result>\nLean could not check this snippet: no verdict. (cannot decide)\n</lean_result>\n"
    publish_rollout(run, "undecided", step=1, response="…", verdict="valid", reward=1.0, tool_calls=[{
        "snippet": "theorem t (n : ℕ) : n + 0 = n := by simp", "reply": reply, "verdict": "infra_error",
        "is_decided": False, "asked_at": 10.0, "answered_at": 11.0}])
    page.wait_for_selector('#rollouts li[data-rollout-key="undecided"] ol.tool-calls')
    label = page.locator('#rollouts li[data-rollout-key="undecided"] ol.tool-calls .tool-label').inner_text()
    assert "no verdict: the verifier could not decide" in label
