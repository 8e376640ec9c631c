"""A slow browser drops progress frames rather than delaying stored events (issue 23).

A run page in Chromium is made slow (CDP's CPU throttling, 4×) while 16 scripted answers stream: about four
progress frames a second reach the page, each of about 40 pieces. Four times, a page script blocks the page's main
thread for BLOCK_MS, as a heavy tab would; while it is blocked, progress frames pile up in its socket and one
answer is stored (its rollout_finished goes through the ingester to the same socket, behind them). The page must:
- drop the progress frames it could not read in time (it counts them: data-progress-frames-dropped on the list);
- show the stored rollout's verdict within CATCH_UP_WITHIN_S of being free again: the stored event waits for the
  block (nothing can help that), never behind the progress frames queued before it;
- and once fast again, show every answer still being written with its whole text so far: a dropped frame is
  made good by the latest text (/api/runs/<id>/writing), never by a guess.

The answers are scripted (a stand-in for a model's, so that the load is known) but travel the real path:
trainer.observability.live's LiveRollouts and RedisLiveSink, Redis pub/sub, the forwarder process, Channels, the page; the
stored rollouts go through the durable stream and the ingester process."""

import queue
import threading
import time

import pytest
from django.conf import settings

from tests.browser.conftest import log_in
from tests.browser.test_proof_viewer_in_chromium import publish_rollout
from trainer.observability.events import EventPublisher, RedisStreamSink
from trainer.observability.live import LiveRollouts, RedisLiveSink

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ANSWERS = 16
STORED = (0, 1, 2, 3)  # stored one at a time, each while the page is blocked
ROUND_S = 0.1
BLOCK_MS = 2000
CATCH_UP_WITHIN_S = 1.0
# Blocks the main thread for `ms` from the next task on, then notes when it was free again (page clock, ms).
BLOCKER = """
window.__blockEnds = [];
window.__blockFor = (ms) => setTimeout(() => {
  const end = performance.now() + ms;
  while (performance.now() < end) {}
  window.__blockEnds.push(Date.now());
}, 0);
"""
# When each card is first drawn as stored (page clock, ms): the same machine's clock as the test's.
RECORD_STORED = """
window.__storedAt = {};
new MutationObserver(() => {
  for (const card of document.querySelectorAll('#writing > li.writing[data-state=stored]')) {
    window.__storedAt[card.dataset.rolloutKey] ??= Date.now();
  }
}).observe(document, {subtree: true, childList: true, attributes: true});
"""


def key_of(index):
    return f"a1-s5-p{index}-r0"


def text_of(index, rounds):
    """Answer ``index`` after ``rounds`` rounds of writing (plain prose: one block on its card)."""
    return "".join(f"answer {index} writes piece {n}. " for n in range(rounds)).rstrip()


class ScriptedAnswers:
    """Sixteen answers, each a piece longer every ROUND_S, until ``stop``; ``store(index)`` finishes one and
    publishes its stored rollout between two rounds, and says when (Unix s)."""

    def __init__(self, run):
        self.run = run
        publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
        publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
        self.live = LiveRollouts(publisher.publish_live, lambda p, s: (key_of(p), 5, f"problem_{p}", "first"),
                                 interval_s=0.0, max_rollouts=32)
        self.rounds = 0
        self.stored = set()
        self.requests = queue.Queue()
        self.published = queue.Queue()
        self.stopping = threading.Event()
        self.error = None
        self.thread = threading.Thread(target=self._write, name="scripted-answers", daemon=True)

    def store(self, index, timeout_s=10.0):
        self.requests.put(index)
        return self.published.get(timeout=timeout_s)

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive() and self.error is None, self.error

    def _write(self):
        try:
            while not self.stopping.is_set():
                self.rounds += 1
                for index in set(range(ANSWERS)) - self.stored:
                    text = text_of(index, self.rounds)
                    self.live.update(index, 0, self.rounds * 6, lambda text=text: text)
                while not self.requests.empty():
                    index = self.requests.get()
                    self.stored.add(index)
                    self.live.finish(index, 0, text_of(index, self.rounds), self.rounds * 6)
                    publish_rollout(self.run, key_of(index), step=5, problem_id=f"problem_{index}",
                                    problem_name=f"problem_{index}", response=text_of(index, self.rounds),
                                    verdict="lean_error", reward=0.0, reasons=["Lean reported an error"],
                                    lean_messages=[{"severity": "error", "line": 1, "column": 0, "text": "no proof"}])
                    self.published.put(time.time())
                time.sleep(ROUND_S)
        except Exception as error:  # noqa: BLE001 - reported by the test, which cannot see this thread's exceptions
            self.error = error


def test_a_slowed_page_drops_progress_frames_and_shows_a_stored_verdict_as_soon_as_it_is_free(page, alice, make_run):
    run = make_run(state="running", name="watched run")
    log_in(page, "alice", "alice-password")
    page.add_init_script(RECORD_STORED)
    page.add_init_script(BLOCKER)
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    answers = ScriptedAnswers(run)
    answers.thread.start()
    try:
        page.wait_for_function(f"document.querySelectorAll('#writing > li.writing').length === {ANSWERS}", timeout=20_000)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": 4})
        published = {}
        for index in STORED:
            page.wait_for_timeout(1000)  # the page at work between blocks, throttled
            page.evaluate(f"window.__blockFor({BLOCK_MS})")
            time.sleep(BLOCK_MS / 4000)  # a quarter into the block: progress frames are already queued
            published[key_of(index)] = answers.store(index)
            page.wait_for_function(f"window.__storedAt['{key_of(index)}'] !== undefined", timeout=30_000)
        shown_at = page.evaluate("window.__storedAt")
        free_at = page.evaluate("window.__blockEnds")
        dropped = int(page.locator("#writing").get_attribute("data-progress-frames-dropped"))
        heard = int(page.locator("#writing").get_attribute("data-progress-frames-heard"))
        cdp.send("Emulation.setCPUThrottlingRate", {"rate": 1})
    finally:
        answers.stop()

    after_publication = {key: round(shown_at[key] / 1000 - at, 2) for key, at in published.items()}
    after_block = {key_of(index): round((shown_at[key_of(index)] - free_at[n]) / 1000, 2) for n, index in enumerate(STORED)}
    print(f"stored verdicts shown {after_publication} s after publication, {after_block} s after the page was free; "
          f"progress frames heard {heard}, dropped {dropped}")
    assert all(shown_at[key] / 1000 >= at for key, at in published.items())
    assert dropped > 0, f"the slowed page dropped none of the {heard} progress frames it heard"
    assert heard > dropped, f"the page dropped every progress frame ({dropped} of {heard})"
    assert max(after_block.values()) < CATCH_UP_WITHIN_S, (
        f"stored verdicts waited behind progress frames once the page was free: {after_block} s")
    for index in STORED:
        card = page.locator(f'#writing > li.writing[data-rollout-key="{key_of(index)}"]')
        assert card.locator(".verdict").inner_text() and "error at line 1:0 of the code Lean checked (its page numbers it): no proof" in card.inner_text()

    # Fast again: what was dropped is made good by the latest text, never shown out of order.
    for index in set(range(ANSWERS)) - set(STORED):
        page.wait_for_function("([key, text]) => document.querySelector(`#writing li[data-rollout-key=\"${key}\"] pre.prose`)"
                               "?.textContent === text", arg=[key_of(index), text_of(index, answers.rounds)], timeout=20_000)
