"""The proof viewer in Chromium: live rollouts within 2 s, filters, keyboard, error markers, the retry diff, text-only output."""

import time

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.viewer.conftest import make_attempt  # noqa: F401  (the fixture, shared with the view tests)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# 𝔽 is two UTF-16 units and one code point: a marker placed by UTF-16 index would land two characters off.
# Stored message lines are lines of this checked code, import lines included.
CHECKED_CODE = "import Mathlib\n\ntheorem t (x : 𝔽) (h : x₀ ≤ 𝔽𝔽) : bad_goal := by\n  simp\n"
MARKED_LINE = CHECKED_CODE.splitlines()[2]


def publish_rollout(run, key, **fields):
    from django.conf import settings

    from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished

    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)), first_seq=int(time.time() * 1000))
    rollout = RolloutFinished(rollout_key=key, step=fields.pop("step", 7), problem_id=fields.pop("problem_id", "add_small"),
                              problem_name=fields.pop("problem_name", "add_small"), **fields)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout)


@pytest.fixture
def watched_run(make_run, make_attempt):
    run = make_run(state="running", name="watched run")
    for step in range(4):
        run.step_metrics.create(step=step, values={
            "reward/mean": step / 4, "lean/accuracy": step / 5, "format_errors": {"no_valid_think_block": 3 - step},
            "response_length/mean": 100 + step, "response_length/max": 180, "time/generation_s": 2.0,
            "time/learning_s": 1.0, "generation/tokens_per_second": 50.0, "some_new_metric": 1})
    run.evaluations.create(step=2, values={"pass@1": 0.2, "pass@4": 0.4, "retry/pass@1": 0.3, "retry/pass@4": 0.5})
    make_attempt(run, step=3, verdict="valid", reward=1.0, lean_messages=[], rollout_key="old-valid")
    make_attempt(run, step=3, verdict="lean_error", reward=0.0, rollout_key="old-rejected")
    return run


def test_a_published_rollout_appears_within_two_seconds_and_the_filters_and_keys_work(page, alice, watched_run):
    missing = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{watched_run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    assert page.locator("[data-chart=reward] canvas").count() == 1

    started = time.monotonic()
    publish_rollout(watched_run, "live-1", verdict="lean_error", reward=0.0, lean_code="theorem x := by\n  simp")
    page.wait_for_selector('#rollouts li[data-rollout-key="live-1"]', timeout=2000)
    assert time.monotonic() - started < 2.0
    screenshot(page, "run-page")

    page.select_option("#id_verdict", "valid")
    page.wait_for_function("() => !document.querySelector('#rollouts li[data-rollout-key=\"live-1\"]')")
    assert page.locator("#rollouts li.rollout").evaluate_all("nodes => nodes.map(n => n.dataset.rolloutKey)") == ["old-valid"]
    publish_rollout(watched_run, "live-rejected", verdict="lean_error", reward=0.0)
    publish_rollout(watched_run, "live-accepted", verdict="valid", reward=1.0)
    page.wait_for_selector('#rollouts li[data-rollout-key="live-accepted"]', timeout=2000)
    assert page.locator('#rollouts li[data-rollout-key="live-rejected"]').count() == 0
    assert "verdict=valid" in page.url

    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.dataset.rolloutKey") == "live-accepted"
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.dataset.rolloutKey") == "old-valid"
    page.keyboard.press("p")
    publish_rollout(watched_run, "while-paused", verdict="valid", reward=1.0)
    page.wait_for_selector("#pending:not([hidden])", timeout=2000)
    assert page.locator('#rollouts li[data-rollout-key="while-paused"]').count() == 0
    page.keyboard.press("p")
    page.wait_for_selector('#rollouts li[data-rollout-key="while-paused"]', timeout=2000)
    assert missing == []


def test_the_retry_page_marks_each_error_at_its_code_point_column_and_diffs_the_code(page, alice, make_run, make_attempt):
    from proofs.models import RetryFeedback

    run = make_run(state="running")
    column = MARKED_LINE.index("bad_goal")  # Python counts code points, as Lean does
    message = {"severity": "error", "line": 3, "column": column, "end_line": 3, "end_column": column + len("bad_goal"),
               "text": "unknown identifier 'bad_goal'"}
    first = make_attempt(run, rollout_key="first", checked_code=CHECKED_CODE, lean_code="  simp", lean_messages=[message])
    RetryFeedback.objects.create(run=run, parent=first, parent_rollout_key="first", created_step=0,
                                 feedback="Lean rejected line 3: unknown identifier 'bad_goal'")
    retry = make_attempt(run, rollout_key="retry", turn="retry", parent=first, parent_rollout_key="first",
                         checked_code=CHECKED_CODE.replace("simp", "exact h"), lean_code="  exact h",
                         lean_messages=[message], prompt="Fix this proof. Lean said: unknown identifier 'bad_goal'")
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{retry.pk}/")
    marks = page.locator("[data-code-view=attempt] .lean-mark").all_inner_texts()
    assert marks == ["bad_goal"]
    assert page.locator("[data-code-view=first] .lean-mark").all_inner_texts() == ["bad_goal"]
    assert "unknown identifier 'bad_goal'" in page.locator("[data-code-view=attempt] .lean-note").inner_text()
    assert page.locator(".code-diff .diff-del").all_inner_texts() == ["-   simp\n"] or \
        [t.strip() for t in page.locator(".code-diff .diff-del").all_inner_texts()] == ["-   simp"]
    assert [t.strip() for t in page.locator(".code-diff .diff-ins").all_inner_texts()] == ["+   exact h"]
    assert "Lean rejected line 3" in page.locator("#retry-feedback").inner_text()
    assert "Fix this proof" in page.locator("#retry-prompt").inner_text()
    screenshot(page, "retry")


def test_script_payloads_in_model_output_render_as_text_live_and_stored(page, alice, make_run, make_attempt):
    payload = '<img src=x onerror="window.__owned=1"><script>window.__owned=2</script>'
    run = make_run(state="running")
    stored = make_attempt(run, rollout_key="stored", reasoning=payload, lean_code=payload, problem_name=payload,
                          checked_code=f"theorem t : True := by\n  {payload}",
                          lean_messages=[{"severity": "error", "line": 2, "column": 2, "text": payload}])
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    publish_rollout(run, "live-hostile", reasoning=payload, lean_code=payload, problem_name=payload,
                    lean_messages=[{"severity": "error", "line": 1, "column": 0, "text": payload}], reasons=[payload])
    card = page.wait_for_selector('#rollouts li[data-rollout-key="live-hostile"]', timeout=2000)
    assert payload in card.inner_text()
    page.goto(f"/proofs/{stored.pk}/")
    assert payload in page.locator("[data-code-view=attempt] .lean-note").inner_text()
    assert page.evaluate("window.__owned") is None and dialogs == []
    assert page.locator("img[src=x]").count() == 0


@pytest.mark.parametrize("numbering", ["after-header", "as-sent"])
def test_the_error_marker_sits_on_the_failing_tactic_after_a_multi_line_import_header(page, alice, make_run, numbering):
    """Scored by the stand-in in either kimina-lean-server numbering, stored through the event path, drawn once."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from proofs.models import ProofAttempt

    from tests.verification.conftest import MULTI_LINE_HEADER, answer, make_config, problem
    from trainer.recipe.reward import RewardScorer
    from trainer.verification.client import LeanVerifier
    from trainer.verification.line_numbering import LineNumbering
    from trainer.verification.standin_server import StandinServerThread, StandinSettings

    assert MULTI_LINE_HEADER.count("import ") == 2
    statement = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"
    with StandinServerThread(StandinSettings(line_numbering=LineNumbering(numbering))) as server:
        config = make_config(server.url)

        async def score():
            verifier = LeanVerifier(config.verifier, environment="browser-test")
            try:
                return await RewardScorer(config, verifier).score(problem(), answer(statement + "\n  norm_num\n  omega"))
            finally:
                await verifier.aclose()

        # Playwright's sync API runs an event loop in this thread: score in another one.
        with ThreadPoolExecutor(1) as thread:
            scored = thread.submit(asyncio.run, score()).result()
    [error] = scored.verification.errors
    run = make_run(state="running")
    publish_rollout(run, "multi-header", verdict="lean_error", reward=0.0, checked_code=scored.checked_code,
                    lean_code=statement + "\n  norm_num\n  omega",
                    lean_messages=[message.as_dict() for message in scored.verification.messages])
    deadline = time.monotonic() + 10
    while not ProofAttempt.objects.filter(run=run, rollout_key="multi-header").exists():
        assert time.monotonic() < deadline, "the rollout event was not stored"
        time.sleep(0.05)
    attempt = ProofAttempt.objects.get(run=run, rollout_key="multi-header")
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{attempt.pk}/")
    marked = page.locator("[data-code-view=attempt] .lean-line", has=page.locator(".lean-note.sev-error"))
    assert marked.count() == 1
    assert marked.get_attribute("data-line") == str(error.line)
    assert marked.locator(".line-no").inner_text() == str(error.line)
    assert marked.locator(".lean-mark.sev-error").all_inner_texts() == ["omega"]
    # The axioms answer (an info message) sits on the #print axioms line, not on a line of the proof.
    axioms = page.locator("[data-code-view=attempt] .lean-line", has=page.locator(".lean-note", has_text="depends on axioms"))
    assert axioms.locator(".line-no").inner_text() == str(scored.checked_code.count("\n"))
    assert scored.checked_code.split("\n")[error.line - 1] == "  omega"
