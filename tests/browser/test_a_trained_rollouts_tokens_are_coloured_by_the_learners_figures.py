"""A cpu-smoke run's rollout page draws the answer as tokens coloured by the learner's log-probability, entropy
and mismatch, at 1,400 px and at 390 px; hovering or focusing a token shows its figures, equal to the stored
ones, which the API returns too; the tokens the clip changed and Lean's context are marked."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.browser.trainer_events import wait_until
from trainer.sft.smoke_model import write_smoke_promptset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def smoke_run(make_run, lean_standin, platform_processes, tmp_path):
    """A cpu-smoke run trained by the trainer's own command into the run's artifacts, its events through Redis
    to the platform's ingester, as a dispatched run's are."""
    from django.conf import settings

    from proofs.models import ProofAttempt
    from trainer.config import RunConfig

    run = make_run(state="starting", preset="cpu-smoke", config=RunConfig.from_preset("cpu-smoke").to_json_dict())
    promptset = tmp_path / "smoke.jsonl"
    write_smoke_promptset(promptset)
    finished = subprocess.run(
        [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
         "--output", str(run.artifacts_dir), "--lean-url", lean_standin.url, "--events", settings.REDIS_URL,
         "--run-id", str(run.pk), "--attempt", "1"],
        cwd=REPOSITORY, capture_output=True, text=True, timeout=800)
    assert finished.returncode == 0, finished.stderr[-4000:]
    trained = wait_until(lambda: list(ProofAttempt.objects.filter(run=run, step=2, is_evaluation=False, num_tokens__gt=0)
                                      .exclude(reward=None)), timeout_s=60, what="step 2's rollouts stored")
    return run, trained[0]


def hover_figures(page, index: int) -> dict:
    page.hover(f"#tokens .token[data-index='{index}']")
    page.wait_for_function("i => document.querySelector('#token-readout').dataset.index === String(i)", arg=index)
    return page.eval_on_selector_all("#token-readout dd[data-figure]",
                                     "cells => Object.fromEntries(cells.map(c => [c.dataset.figure, c.textContent]))")


def as_number(text: str):
    return None if text == "–" else float(text)


def colours(page) -> list[str]:
    return page.eval_on_selector_all("#tokens .token", "spans => spans.map(s => s.style.backgroundColor)")


@pytest.mark.parametrize("width", [1400, 390])
def test_the_tokens_are_coloured_and_each_shows_its_stored_figures(page, alice, smoke_run, width):
    run, attempt = smoke_run
    page.set_viewport_size({"width": width, "height": 900})
    stored = attempt.token_records()
    assert stored is not None, "the trainer wrote no token records for a trained rollout"
    log_in(page, "alice", "alice-password")
    api = page.request.get(f"/api/proofs/attempts/{attempt.pk}/tokens").json()
    assert api["tokens"]["learner_logprob"] == stored["learner_logprob"]
    assert api["tokens"]["entropy"] == stored["entropy"] and api["advantage"] == stored["advantage"]

    page.goto(f"/proofs/{attempt.pk}/")
    page.wait_for_selector("#token-view[data-tokens='drawn']")
    # One span a token, except a character whose bytes several tokens hold: one span over them (data-tokens).
    spans = page.eval_on_selector_all("#tokens .token", "spans => spans.map(s => [s.textContent, Number(s.dataset.index),"
                                      " Number(s.dataset.tokens)])")
    assert "".join(text for text, _, _ in spans) == "".join(stored["token_texts"])
    assert sum(count for _, _, count in spans) == len(stored["token_texts"]) == attempt.num_tokens
    single = [index for _, index, count in spans if count == 1]

    drawn = {}
    for figure in ("learner_logprob", "entropy", "mismatch"):
        page.select_option("#token-figure", figure)
        page.wait_for_selector(f"#token-view[data-figure='{figure}']")
        drawn[figure] = colours(page)
        assert any(drawn[figure]), f"no token is coloured by {figure}"
    assert drawn["learner_logprob"] != drawn["entropy"]

    for index in sorted({single[0], single[len(single) // 2], single[-1]}):
        shown = hover_figures(page, index)
        assert as_number(shown["learner_logprob"]) == stored["learner_logprob"][index]
        assert as_number(shown["engine_logprob"]) == stored["engine_logprob"][index]
        assert as_number(shown["entropy"]) == stored["entropy"][index]
        assert as_number(shown["loss_weight"]) == stored["loss_weight"][index]
        assert as_number(shown["mismatch"]) == stored["learner_logprob"][index] - stored["engine_logprob"][index]
        assert as_number(shown["mismatch"]) == api["tokens"]["learner_logprob"][index] - api["tokens"]["engine_logprob"][index]

    # The keyboard reaches the same figures: one tab stop, then the arrow keys.
    second = spans[1][1]
    page.focus("#tokens .token[data-index='0']")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("i => document.activeElement.dataset.index === String(i)", arg=second)
    assert page.eval_on_selector("#token-readout", "r => r.dataset.index") == str(second)
    assert as_number(page.text_content("#token-readout dd[data-figure='entropy']")) == stored["entropy"][second]

    wide = page.evaluate("""() => [...document.querySelectorAll('body *')].filter(n => {
        const r = n.getBoundingClientRect();
        return r.width > 0 && r.right > document.documentElement.clientWidth + 1 && !n.closest('pre, .table-scroll');
    }).slice(0, 5).map(n => `${n.tagName}#${n.id}.${n.className}`)""")
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1, wide
    screenshot(page, f"rollout-tokens-{width}")


def test_a_stranger_reads_no_tokens_and_sees_no_page(browser, charlie, smoke_run, platform_processes):
    _, attempt = smoke_run
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": 390, "height": 900})
    stranger = context.new_page()
    try:
        log_in(stranger, "charlie", "charlie-password")
        assert stranger.request.get(f"/api/proofs/attempts/{attempt.pk}/tokens").status == 404
        assert stranger.goto(f"/proofs/{attempt.pk}/").status == 404
        assert attempt.rollout_key not in stranger.content()
    finally:
        context.close()


def test_token_texts_are_drawn_as_text_and_a_rollout_without_records_says_so(page, alice, make_run):
    from proofs.models import ProofAttempt
    from trainer.observability import token_records

    run = make_run(state="running")
    attempt = ProofAttempt.objects.create(run=run, rollout_key="a1-s1-p0-r0", step=1, problem_key="p", reward=0.0)
    evaluation = ProofAttempt.objects.create(run=run, rollout_key="a1-eval1-p0-r0", step=1, problem_key="p",
                                             is_evaluation=True, reward=0.0)
    unrecorded = ProofAttempt.objects.create(run=run, rollout_key="a1-s5-p0-r0", step=5, problem_key="p", reward=0.0)
    hostile = ["<b>bold</b>", "<img src=x onerror=\"document.title='owned'\">"]
    token_records.write_step_records(run.artifacts_dir, 1, 1, [token_records.TokenRecord(
        attempt.rollout_key, 0.5, [1, 2], [-0.5, -0.5], [-0.5, -0.5], [1.0, 1.0], [1.0, 1.0], [0, 0])],
        lambda ids: hostile)
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{attempt.pk}/")
    page.wait_for_selector("#token-view[data-tokens='drawn']")
    assert page.eval_on_selector_all("#tokens .token", "spans => spans.map(s => s.textContent)") == hostile
    assert page.query_selector("#tokens b, #tokens img") is None and page.title() != "owned"
    hover_figures(page, 1)
    assert page.text_content("#token-readout dd[data-figure='text']") == '"<img src=x onerror=\\"document.title=\'owned\'\\">"'

    page.goto(f"/proofs/{unrecorded.pk}/")
    page.wait_for_selector("#token-view[data-tokens='none']")
    assert page.text_content("#token-status").startswith("Not recorded, and never will be:")
    assert page.query_selector("#tokens .token") is None  # nothing drawn, rather than zeros

    page.goto(f"/proofs/{evaluation.pk}/")
    assert page.query_selector("#token-view") is None  # an evaluation sample trained nothing: no token view
