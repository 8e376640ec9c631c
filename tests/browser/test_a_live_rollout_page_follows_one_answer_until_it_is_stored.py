"""A rollout's own page (/runs/<id>/rollouts/<key>/), in Chromium: opened as soon as the answer's first piece is
published, it says "being written" and shows the text growing; when Lean's verdict is stored, the same card
becomes the stored rollout (verdict, Lean's messages at their line and column, a link to its proof attempt) with
no reload, even when the socket missed the stored event.

The answer is scripted (tests/browser/test_a_writing_card_draws_think_and_lean_blocks_as_they_form.py's
ScriptedAnswer, a stand-in for a model's, so that each stage is reached on cue) but travels the real live path:
trainer.observability.live's LiveRollouts and RedisLiveSink, Redis pub/sub, the forwarder process, Channels, the page; the
stored rollout goes through the durable stream and the ingester process."""

import pytest

from tests.browser.conftest import log_in
from tests.browser.test_a_writing_card_draws_think_and_lean_blocks_as_they_form import (
    ANSWER,
    KEY,
    LEAN_OPEN,
    STATEMENT,
    THINKING,
    THOUGHT,
    ScriptedAnswer,
)
from tests.browser.test_proof_viewer_in_chromium import publish_rollout
from tests.browser.test_the_run_page_reaches_the_end_despite_dropped_messages import store
from tests.browser.test_the_run_page_shows_answers_as_they_are_written import RECORD_CHANGES, growth_then_verdict

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_its_page_works_from_the_first_piece_shows_the_text_growing_then_the_stored_rollout_without_a_reload(
        page, alice, make_run):
    run = make_run(state="running", name="watched run")
    answer = ScriptedAnswer(run)
    answer.write("<think>\nThe goal is", 4)
    answer.wait_until_sent(1)
    log_in(page, "alice", "alice-password")
    page.add_init_script(RECORD_CHANGES)
    live_url = f"/runs/{run.pk}/rollouts/{KEY}/"
    response = page.goto(live_url)
    assert response.status == 200 and response.url.endswith(live_url)
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    assert page.locator("#live-rollout-state").inner_text() == "being written"
    card = page.locator(f'#writing > li.writing[data-rollout-key="{KEY}"]')
    card.locator("details.think pre").wait_for(timeout=10_000)
    assert card.locator("details.think pre").inner_text().strip() == "The goal is"
    page.wait_for_selector("body[data-rollout-state=writing]")

    stages = [("<think>\nThe goal is a closed sum", 12), (THINKING, 30), (LEAN_OPEN, 80), (ANSWER + " ", 84)]
    for sent, (text, tokens) in enumerate(stages, start=2):
        answer.write(text, tokens)
        answer.wait_until_sent(sent)
        page.wait_for_function("([key, tokens]) => document.querySelector(`#writing li[data-rollout-key=\"${key}\"] .tokens`)"
                               "?.textContent === `${tokens} tokens`", arg=[KEY, tokens], timeout=10_000)
    assert card.locator(".lean-block.closed .kn").first.inner_text() == "theorem"
    assert page.locator("#live-rollout-state").inner_text() == "being written"

    answer.live.finish(0, 1, ANSWER, 85)
    page.wait_for_selector("body[data-rollout-state=checking]", timeout=10_000)
    assert page.locator("#live-rollout-state").inner_text() == "being checked by Lean"

    publish_rollout(run, KEY, step=3, response=ANSWER, reasoning=THOUGHT, lean_code=STATEMENT + "\n  norm_num",
                    verdict="lean_error", reward=0.0, reasons=["Lean reported an error"],
                    lean_messages=[{"severity": "error", "line": 2, "column": 2, "text": "linarith failed"}])
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"][data-state=stored] .verdict', timeout=20_000)
    assert page.evaluate("window.__sameDocument") is True, "the page reloaded to show the stored rollout"
    assert page.url.endswith(live_url)
    assert page.locator("#live-rollout-state").inner_text() == "stored"
    assert card.count() == 1
    assert "error at line 2:2 of the code Lean checked (its page numbers it): linarith failed" in card.inner_text()
    assert card.locator(".verdict").inner_text()  # the verdict's label, from the trainer's list
    proof_link = page.locator("a", has_text="its proof attempt")
    proof_link.wait_for(timeout=5_000)
    assert proof_link.get_attribute("href").startswith("/proofs/")

    pairs = growth_then_verdict(page.evaluate("window.__writing"), KEY)
    assert len(pairs) >= 2, f"the card grew {len(pairs)} times in the same shape before it was stored"
    page.reload()  # opened again once stored: the server sends the reader to the proof attempt's page
    assert "/proofs/" in page.url


def test_a_stored_event_its_socket_missed_still_turns_the_page_into_the_stored_rollout(page, alice, make_run):
    run = make_run(state="running", name="watched run")
    answer = ScriptedAnswer(run)
    answer.write(THINKING, 30)
    answer.wait_until_sent(1)
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/rollouts/{KEY}/")
    page.evaluate("window.__sameDocument = true")
    page.locator(f'#writing > li.writing[data-rollout-key="{KEY}"] details.think pre').wait_for(timeout=10_000)
    page.wait_for_selector("body[data-live=connected]")  # past the socket's backlog: only the API can tell it now
    answer.live.finish(0, 1, ANSWER, 85)
    # Stored, but never forwarded to the page: what the channel layer does to a message for a slow client.
    store(run, 1, type="rollout_finished", rollout_key=KEY, step=3, problem_id="add_small", problem_name="add_small",
          turn="first", response=ANSWER, lean_code=STATEMENT + "\n  norm_num", verdict="lean_error", reward=0.0,
          reasons=["Lean reported an error"], lean_messages=[{"severity": "error", "line": 2, "column": 2, "text": "linarith failed"}])
    page.wait_for_selector("body[data-rollout-state=stored]", timeout=20_000)  # the page asks every 5 s
    assert page.evaluate("window.__sameDocument") is True, "the page reloaded to show the stored rollout"
    card = page.locator(f'#writing > li.writing[data-rollout-key="{KEY}"][data-state=stored]')
    card.wait_for(timeout=5_000)
    assert "error at line 2:2 of the code Lean checked (its page numbers it): linarith failed" in card.inner_text()
