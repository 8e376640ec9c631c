"""The rollout page of an answer in a chain of corrections (retry.max_rounds = 3) draws the problem's rounds as one
trajectory, round 0 (the first attempt) to round 3, each with Lean's errors and the diff of its Lean code from the
round before; model output in it stays text. The run page's cards name each later round, live and as stored.

The rounds go the way a run stores them: published as ROLLOUT_FINISHED events to the run's stream, each naming the
answer it corrects (``parent_rollout_key``), ingested by the platform's own ingester, and drawn live on the run page
before the rollout page is opened in Chromium.
"""

import time

import pytest

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATEMENT = "theorem smoke_rat_add : (1 : ℚ) / 4 + 1 / 4 = 1 / 2 := by"
HOSTILE = '<img src=x onerror="window.__owned=1">'
ROUNDS = [  # (rollout key, Lean code after the statement, verdict, Lean's error)
    ("a1-s1-p0-r0", "  omega", "lean_error", "omega could not prove the goal"),
    ("a1-s2-retry-p0-r1", "  omega\n  simp", "lean_error", f"no goals to be proved {HOSTILE}"),
    ("a1-s3-retry-p1-r0", "  ring_nf\n  simp", "lean_error", "simp made no progress"),
    ("a1-s4-retry-p0-r0", "  ring_nf\n  norm_num", "valid", None),
]


def publish_rounds(run):
    from django.conf import settings

    from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished

    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)), first_seq=int(time.time() * 1000))
    parent = None
    for step, (key, code, verdict, error) in enumerate(ROUNDS, 1):
        messages = [{"severity": "error", "line": 2, "column": 2, "text": error}] if error else []
        publisher.publish(EventType.ROLLOUT_FINISHED, RolloutFinished(
            rollout_key=key, step=step, problem_id="smoke_rat_add", problem_name="smoke_rat_add",
            formal_statement=STATEMENT, turn="retry" if parent else "first", parent_rollout_key=parent, round=step - 1,
            lean_code=f"{STATEMENT}\n{code}", checked_code=f"{STATEMENT}\n{code}", verdict=verdict,
            reward=1.0 if verdict == "valid" else 0.0, lean_messages=messages,
            reasons=[] if verdict == "valid" else [f"Lean rejected the proof at line 2: {error}"]))
        parent = key


def test_the_middle_rounds_page_draws_all_four_rounds_with_their_errors_and_diffs(page, alice, make_run):
    from proofs.models import ProofAttempt

    run = make_run(state="running")
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    publish_rounds(run)
    for key, *_ in ROUNDS:  # drawn live, so stored
        page.wait_for_selector(f'#rollouts li[data-rollout-key="{key}"]', timeout=5000)
    assert round_labels(page) == {"a1-s1-p0-r0": [], "a1-s2-retry-p0-r1": [], "a1-s3-retry-p1-r0": [" · round 2"],
                                  "a1-s4-retry-p0-r0": [" · round 3"]}  # round 1 is the card's "Retry"
    assert page.locator('#rollouts li[data-rollout-key="a1-s4-retry-p0-r0"] .round').get_attribute("title") == \
        "Corrects a1-s3-retry-p1-r0"

    middle = ProofAttempt.objects.get(run=run, rollout_key=ROUNDS[2][0])
    page.goto(f"/proofs/{middle.pk}/")
    rounds = page.locator("#trajectory li.round")
    assert rounds.evaluate_all("nodes => nodes.map(n => n.dataset.round)") == ["0", "1", "2", "3"]
    assert page.locator("#trajectory li.current-round").get_attribute("data-round") == "2"
    assert "round 0 (the first attempt) to round 3" in page.locator("#trajectory h2").inner_text()

    errors = [rounds.nth(index).locator(".round-errors").all_inner_texts() for index in range(4)]
    assert errors == [["line 2: omega could not prove the goal"], [f"line 2: no goals to be proved {HOSTILE}"],
                      ["line 2: simp made no progress"], []]
    assert "Valid" in rounds.nth(3).locator(".round-verdict").inner_text()
    assert rounds.nth(3).locator(".round-reward").inner_text() == "1.0"

    def changes(index):
        return ([line.strip() for line in rounds.nth(index).locator(".diff-del").all_inner_texts()],
                [line.strip() for line in rounds.nth(index).locator(".diff-ins").all_inner_texts()])

    assert rounds.nth(0).locator(".round-diff").count() == 0  # nothing before the first attempt
    assert changes(1) == ([], ["+   simp"])
    assert changes(2) == (["-   omega"], ["+   ring_nf"])
    assert changes(3) == (["-   simp"], ["+   norm_num"])
    # Links lead to the other rounds' own pages; the current one is named, not linked.
    assert rounds.nth(0).locator("a").get_attribute("href") == f"/proofs/{ProofAttempt.objects.get(run=run, rollout_key=ROUNDS[0][0]).pk}/"
    assert rounds.nth(2).locator(".this-rollout").count() == 1
    assert page.locator("img[src=x]").count() == 0 and dialogs == [] and page.evaluate("window.__owned") is None
    screenshot(page, "trajectory")

    page.goto(f"/runs/{run.pk}/")  # the run page drawn from what was stored
    page.wait_for_selector('#rollouts li[data-rollout-key="a1-s4-retry-p0-r0"]')
    assert round_labels(page)["a1-s4-retry-p0-r0"] == [" · round 3"]


def round_labels(page) -> dict[str, list[str]]:
    return {key: page.locator(f'#rollouts li[data-rollout-key="{key}"] .round').all_inner_texts() for key, *_ in ROUNDS}

