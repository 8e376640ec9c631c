"""The run page of a cpu-smoke run with ``retry.max_rounds=3`` draws, in the card of each later round, the problem's
trajectory up to it (round 0 → 1 → 2 → 3), each round with its verdict, as the rounds arrive over the live channel,
and the same trajectory after a reload, from what was stored.

A real run: ``python -m trainer run`` with the smoke model (trainer/sft/smoke_model.py) against the stand-in Lean server,
publishing to the run's Redis stream as a dispatched run does; the platform's own ingester stores the events and
forwards them to the page over Channels. ``retry.replay_probability=1`` deepens a chain every step, as in
tests/rollout/test_a_cpu_smoke_run_with_three_rounds_reaches_round_three_checked_by_lean.py.
"""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.browser.conftest import log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

REPOSITORY = Path(__file__).resolve().parents[2]
STEPS = 5
THIRD_ROUND = "#rollouts > li.rollout[data-round='3']"


def trajectory(page, key: str) -> list[tuple[str, str, str]]:
    """(round, rollout key, verdict in words) of each round the card of ``key`` draws, round 0 first."""
    return page.locator(f'#rollouts > li[data-rollout-key="{key}"] .round-trajectory > li').evaluate_all(
        "items => items.map(i => [i.dataset.round, i.dataset.rolloutKey, i.querySelector('.round-verdict').textContent])")


def stored_verdict(attempt) -> str:
    return attempt.format_error or attempt.get_verdict_display() or "—"


def test_a_third_rounds_card_draws_rounds_zero_to_three_with_their_verdicts_live_and_after_a_reload(
        page, alice, make_run, tmp_path):
    from django.conf import settings

    from proofs.models import ProofAttempt
    from trainer.config import RunConfig
    from trainer.sft.smoke_model import write_smoke_promptset
    from trainer.verification.standin_server import StandinServerThread

    overrides = {"retry": {"max_rounds": 3, "replay_probability": 1.0},
                 "schedule": {"total_steps": STEPS, "eval_every": STEPS}}
    run = make_run(state="running", preset="cpu-smoke", name="three rounds",
                   config=RunConfig.from_preset("cpu-smoke", overrides).to_json_dict())
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    page.evaluate("window.__sameDocument = true")  # gone if the page ever reloads: what follows arrived live

    promptset = tmp_path / "smoke.jsonl"
    write_smoke_promptset(promptset)
    with StandinServerThread() as server, (tmp_path / "trainer.log").open("w") as log:
        trainer = subprocess.Popen(
            [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
             "--output", str(tmp_path / "run"), "--lean-url", server.url, "--events", settings.REDIS_URL,
             "--run-id", str(run.pk), "--set", f"schedule.total_steps={STEPS}", "--set", f"schedule.eval_every={STEPS}",
             "--set", "retry.max_rounds=3", "--set", "retry.replay_probability=1.0"],
            cwd=REPOSITORY, stdout=log, stderr=subprocess.STDOUT)
        try:
            try:
                page.wait_for_selector(THIRD_ROUND, timeout=600_000)
            except Exception:  # noqa: BLE001 - any failure to appear: re-raised with what the trainer said
                raise AssertionError("no third round reached the page; the trainer said:\n"
                                     + (tmp_path / "trainer.log").read_text()[-3000:]) from None
            key = page.locator(THIRD_ROUND).first.get_attribute("data-rollout-key")
            live = trajectory(page, key)
            assert trainer.wait(timeout=600) == 0, (tmp_path / "trainer.log").read_text()[-3000:]
        finally:
            if trainer.poll() is None:
                trainer.kill()
                trainer.wait()
    assert page.evaluate("window.__sameDocument") is True

    assert [round_ for round_, _, _ in live] == ["0", "1", "2", "3"]
    assert live[-1][1] == key
    # Each round is the answer the next one corrects, and its verdict is the one stored for it.
    attempts = {a.rollout_key: a for a in ProofAttempt.objects.filter(run=run, rollout_key__in=[k for _, k, _ in live])}
    assert [attempts[k].round for _, k, _ in live] == [0, 1, 2, 3]
    assert [attempts[k].parent_rollout_key for _, k, _ in live[1:]] == [k for _, k, _ in live[:-1]]
    assert [verdict for _, _, verdict in live] == [stored_verdict(attempts[k]) for _, k, _ in live]
    # The card of the round before, drawn when it arrived, drew the trajectory up to itself.
    before = live[2][1]
    if page.locator(f'#rollouts > li[data-rollout-key="{before}"]').count():
        assert trajectory(page, before) == live[:3]
    screenshot(page, "three-round-trajectory-live")

    page.goto(f"/runs/{run.pk}/?round=3#rollouts")  # the stored page, narrowed to the third rounds
    page.wait_for_selector(f'#rollouts > li[data-rollout-key="{key}"]')
    assert trajectory(page, key) == live
    links = page.locator(f'#rollouts > li[data-rollout-key="{key}"] .round-trajectory a').evaluate_all(
        "links => links.map(a => a.getAttribute('href'))")
    assert links == [f"/proofs/{attempts[k].pk}/" for _, k, _ in live[:-1]]  # the current round is named, not linked
