"""During a run, the run page's "Writing now" panel shows an answer's text growing before the answer is stored,
then its verdict in the same card, without a reload (a real run: Ray, the trainer, Redis, the forwarder).

The issue asks for a cpu-demo run; here a cpu-smoke run with the longest answers its preset allows (256 tokens of
a tiny random model, about 2 s each on this machine) keeps the test within minutes: the trainer streams a piece
at once, then every 0.5 s, so a card shows several lengths before Lean's verdict.
"""

import json
import re

import pytest

from runs.models import Run
from tests.browser.conftest import SCREENSHOTS, log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROBLEMS = [{"name": "two_plus_three", "formal_statement": "theorem two_plus_three : (2 : ℕ) + 3 = 5 := by"}]

# Each change of a card in the panel, as the page draws it: which card (the node itself), its state and text length.
RECORD_CHANGES = """
window.__writing = [];
const nodes = new WeakMap();
let next = 0;
new MutationObserver(() => {
  for (const card of document.querySelectorAll('#writing > li.writing')) {
    if (!nodes.has(card)) nodes.set(card, next++);
    const text = [...card.querySelectorAll('pre')].map((pre) => pre.textContent).join('');
    const entry = {key: card.dataset.rolloutKey, node: nodes.get(card), state: card.dataset.state, length: text.length,
                   verdict: card.querySelector('.verdict')?.textContent ?? null};
    const last = window.__writing.findLast((e) => e.key === entry.key);
    if (!last || last.state !== entry.state || last.length !== entry.length) window.__writing.push(entry);
  }
}).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def screenshot_path(name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


def test_an_answer_grows_in_its_card_before_it_is_stored_then_shows_its_verdict_there(page, alice, tmp_path, platform_logs):
    promptset_file = tmp_path / "arith.jsonl"
    promptset_file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in PROBLEMS))
    log_in(page, "alice", "alice-password")
    page.goto("/promptsets/upload/")
    page.fill("#id_name", "arith")
    page.set_input_files("#id_file", str(promptset_file))
    page.click("#promptset-upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/promptsets/\d+/$"))

    page.goto("/runs/new/")
    page.fill("#id_name", "watch it think")
    page.select_option("#id_promptset_version", label="arith v1")
    page.select_option("#id_preset", "cpu-smoke")
    page.fill("#id_max_response_tokens", "256")
    page.add_init_script(RECORD_CHANGES)
    page.click("#launch-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get(name="watch it think")
    phone = page.context.new_page()  # the same run on a 390 px screen
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(page.url)

    try:
        page.wait_for_selector("#writing > li.writing[data-state=writing]", timeout=300_000)
        page.locator("section.writing-now").screenshot(path=str(screenshot_path("writing-now-desktop")))
        page.wait_for_selector("#writing > li.writing[data-state=stored] .verdict", timeout=300_000)
    except Exception:  # noqa: BLE001 - re-raised with the run's state and the platform's logs
        run.refresh_from_db()
        raise AssertionError(f"no answer streamed to a stored verdict; run {run.state}: {run.failure_reason}\n"
                             f"{platform_logs()}")
    screenshot(page, "writing-now-run")
    phone.wait_for_selector("#writing > li.writing", timeout=300_000)
    phone.locator("section.writing-now").screenshot(path=str(screenshot_path("writing-now-390px")))
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways at 390 px"
    changes = page.evaluate("window.__writing")
    grown = []
    for key in {change["key"] for change in changes}:
        history = [change for change in changes if change["key"] == key]
        written = [change["length"] for change in history if change["state"] == "writing"]
        stored = [change for change in history if change["state"] == "stored"]
        if not stored:
            continue
        assert len({change["node"] for change in history}) == 1, f"{key}: the verdict came in another card"
        assert history.index(stored[0]) == len(history) - 1 or all(c["state"] == "stored" for c in history[history.index(stored[0]):])
        assert stored[0]["verdict"], f"{key}: the stored card shows no verdict"
        if len(set(written)) >= 2 and written == sorted(written):
            grown.append(key)
    assert grown, f"no card showed its text growing before it was stored: {changes[:40]}"
