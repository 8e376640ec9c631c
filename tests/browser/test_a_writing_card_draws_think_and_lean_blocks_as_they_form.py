"""A card in "Writing now" draws the answer's parts as they form: the think block open while the model thinks and
closed once it ends, the Lean block as plain text while its fence is open and highlighted by the one Lean lexer
once it closes; then "checking with Lean…", then Lean's verdict and messages in the same card. Model output is
text, never markup. A page opened mid-answer starts from the text so far. Pinning keeps the card.

The answer is scripted (a stand-in for a model's, so that each stage is reached on cue) but travels the real live
path: trainer.observability.live's LiveRollouts and RedisLiveSink, Redis pub/sub, the forwarder process, Channels, the page.
The screenshots of the panel in the README (docs/writing-now-*.png) are taken here: run it with
UPDATE_DOCS_SCREENSHOTS=1 to replace them."""

import os
import shutil
import time
from pathlib import Path

import pytest
from django.conf import settings

from tests.browser.conftest import SCREENSHOTS, log_in
from tests.browser.test_proof_viewer_in_chromium import publish_rollout
from trainer.observability.events import EventPublisher, RedisStreamSink
from trainer.observability.live import LiveRollouts, RedisLiveSink

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEY = "a1-s3-p0-r1"
STATEMENT = "theorem add_small : (2 : ℕ) + 3 = 5 := by"
THINKING = "<think>\nThe goal is a closed sum of numerals. <img src=x onerror=alert(1)> is not markup here.\n"
THOUGHT = THINKING + "So `norm_num` should close it.\n</think>\n\n"
LEAN_OPEN = THOUGHT + "```lean4\n" + STATEMENT + "\n  norm_num"
ANSWER = LEAN_OPEN + "\n```"
DOCS = Path(__file__).resolve().parents[2] / "docs"


class ScriptedAnswer:
    def __init__(self, run):
        publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
        publisher.live = self.sink = RedisLiveSink(settings.REDIS_URL, str(run.pk))
        self.live = LiveRollouts(publisher.publish_live, lambda p, s: (KEY, 3, "add_small", "first"),
                                 interval_s=0.0, max_rollouts=8)

    def write(self, text, tokens):
        self.live.update(0, 1, tokens, lambda: text)

    def wait_until_sent(self, pieces, timeout_s=10.0):
        """Until the sink has put ``pieces`` pieces in Redis (it sends from a thread of its own)."""
        deadline = time.monotonic() + timeout_s
        while self.sink.sent < pieces:
            assert time.monotonic() < deadline, f"the live sink sent {self.sink.sent} of {pieces} pieces in {timeout_s} s"
            time.sleep(0.02)


def card_of(page):
    return page.locator(f'#writing > li.writing[data-rollout-key="{KEY}"]')


def test_a_card_draws_each_part_as_it_forms_then_the_verdict_in_place(page, alice, make_run):
    run = make_run(state="running", name="watched run")
    answer = ScriptedAnswer(run)
    answer.write(THINKING, 30)  # written before the page opens: the page starts from it
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    card = card_of(page)
    card.wait_for(timeout=10_000)
    assert card.locator("details.think summary").inner_text() == "Thinking…"
    assert "<img src=x onerror=alert(1)>" in card.locator("details.think pre").inner_text()
    assert card.locator("img").count() == 0

    answer.write(LEAN_OPEN, 80)
    page.wait_for_function(f"document.querySelector('#writing li[data-rollout-key=\"{KEY}\"] .lean-block.open')")
    assert card.locator("details.think summary").inner_text() == "Reasoning"
    assert card.locator(".lean-block pre").inner_text().endswith("norm_num")
    assert card.locator(".lean-block .kn").count() == 0  # not highlighted while the fence is open

    answer.write(ANSWER + " ", 84)  # the fence closes
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"] .lean-block.closed .kn')
    assert card.locator(".lean-block.closed .kn").first.inner_text() == "theorem"
    assert card.locator(".tokens").inner_text() == "84 tokens"
    shoot(page, "writing-now-desktop")
    phone = page.context.new_page()
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(f"/runs/{run.pk}/")
    card_of(phone).locator(".lean-block.closed .kn").first.wait_for(timeout=10_000)  # from the writing API
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways at 390 px"
    shoot(phone, "writing-now-390px")
    phone.close()

    card.locator("button.pin").click()
    assert "pin=" in page.url  # at once; the card is drawn pinned on the next animation frame
    page.wait_for_selector(f'#writing li.pinned[data-rollout-key="{KEY}"]', timeout=5_000)
    assert card.get_attribute("class").count("pinned") == 1

    answer.live.finish(0, 1, ANSWER, 85)
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"][data-state=checking]')
    assert card.locator(".status").inner_text() == "checking with Lean…"

    publish_rollout(run, KEY, step=3, response=ANSWER, reasoning=THOUGHT, lean_code=STATEMENT + "\n  norm_num",
                    verdict="lean_error", reward=0.0, reasons=["Lean reported an error"],
                    lean_messages=[{"severity": "error", "line": 2, "column": 2, "text": "linarith failed"}])
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"][data-state=stored] .verdict')
    assert card.count() == 1
    assert "error at line 2:2 of the code Lean checked (its page numbers it): linarith failed" in card.inner_text()
    assert "pinned" in card.get_attribute("class")


def shoot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.locator("section.writing-now").screenshot(path=str(path))
    if os.environ.get("UPDATE_DOCS_SCREENSHOTS") == "1":  # only when asked: a test run leaves docs/ as it is
        shutil.copy(path, DOCS / f"{name}.png")
