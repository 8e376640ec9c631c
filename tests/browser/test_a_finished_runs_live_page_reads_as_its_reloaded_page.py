"""A run page open while an evaluation run ends reads, once it has ended, as the same page loaded afresh: the pass@k
report, the "Writing now" panel and the disk the run's folder takes (issue 45).

The run is driven to its end by played events (a real evaluation is too slow here), but they travel the real path:
the answer being written through trainer.observability.live's sink, Redis pub/sub, the forwarder and Channels; the
evaluation and the run's end through the run's Redis Stream, the ingester and Channels."""

import pytest
from playwright.sync_api import TimeoutError

from tests.browser.conftest import log_in
from tests.browser.test_a_writing_card_draws_think_and_lean_blocks_as_they_form import ANSWER, KEY, ScriptedAnswer
from tests.browser.trainer_events import a_live_job, publish, wait_for_state

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# An evaluation's values as trainer/loop/evaluation.py names them: a pass@k curve over 2 problems, 4 samples each.
EVALUATION = {"problems": 2, "censored": 0, "curve/problems_scored": 2,
              "curve/pass@1": 0.25, "curve/pass@1/ci95_low": 0.0, "curve/pass@1/ci95_high": 0.5,
              "curve/pass@4": 0.5, "curve/pass@4/ci95_low": 0.0, "curve/pass@4/ci95_high": 1.0}

# What is compared: the parts a person reads (innerText, so what is hidden is not read).
READ = """() => ({
  passAtK: document.querySelector('#pass-at-k').innerText,
  writing: document.querySelector('#writing').innerText,
  disk: document.querySelector('#disk-used').innerText,
})"""


def test_an_evaluation_run_watched_to_its_end_shows_what_a_reload_shows(page, alice, make_run):
    run = make_run(state="running", kind="eval", name="watched evaluation")
    with a_live_job(run):
        watch_it_end(page, run)


def watch_it_end(page, run):
    run.artifacts_dir.mkdir(parents=True, exist_ok=True)
    (run.artifacts_dir / "config.json").write_text("{}")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    assert "No evaluation yet" in page.locator("#pass-at-k").inner_text()

    answer = ScriptedAnswer(run)  # a sample that failed the format check: scored, never sent to Lean, never stored
    answer.write(ANSWER[:40], 10)
    answer.live.finish(0, 1, ANSWER, 85)
    page.wait_for_selector(f'#writing li[data-rollout-key="{KEY}"][data-state=checking]', timeout=10_000)

    (run.artifacts_dir / "samples.jsonl").write_bytes(b"x" * 50_000)  # what the evaluation wrote before it ended
    publish(run, "evaluation", {"step": 0, "values": EVALUATION})
    publish(run, "run_finished", {"status": "succeeded", "step": 0})
    wait_for_state(run, "succeeded")
    page.wait_for_function("document.querySelector('#run-state').textContent === 'Succeeded'", timeout=30_000)
    page.wait_for_function("document.querySelector('#pass-at-k .pass-at-k-table')", timeout=30_000)
    page.wait_for_function(f"!document.querySelector('#writing li[data-rollout-key=\"{KEY}\"]')", timeout=30_000)
    try:
        page.wait_for_function("document.querySelector('#disk-used').innerText.includes('50.0 kB')", timeout=30_000)
    except TimeoutError as error:
        files = sorted((path.name, path.stat().st_size) for path in run.artifacts_dir.rglob("*") if path.is_file())
        raise AssertionError(f"the page says {page.locator('#disk-used').inner_text()!r}; the folder holds {files}") from error
    live = page.evaluate(READ)

    page.reload()
    page.wait_for_selector("body[data-live=connected]")
    reloaded = page.evaluate(READ)
    assert live == reloaded
    assert "0.2500" in reloaded["passAtK"] and "Nothing is being written right now." in reloaded["writing"]
