"""A cpu-smoke run exercises the paths behind the format check: Lean's verdicts, rewards, retries.

Its model (trainer/smoke_model.py) was taught the answer format by a short SFT; before it, every
smoke answer failed the format check and nothing reached Lean. A real run: the trainer's own
command, the SFT'd model from its cache (built here on first use), the stand-in Lean server on a
loopback port, the demo promptset (closed arithmetic the stand-in decides). Everything below is
counted from the run's events.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainer.smoke_model import build_smoke_model, smoke_model_folder

pytestmark = pytest.mark.timeout(900)

REPOSITORY = Path(__file__).resolve().parents[2]
STEPS, PROMPTS, SAMPLES = 4, 4, 4


@pytest.fixture(scope="module")
def smoke_run_events(tmp_path_factory):
    from promptsets.demo import DEMO_PROBLEMS
    from trainer.verification.standin_server import StandinServerThread

    folder = tmp_path_factory.mktemp("smoke-run")
    promptset = folder / "demo.jsonl"
    promptset.write_text("".join(json.dumps(problem.as_row()) + "\n" for problem in DEMO_PROBLEMS))
    with StandinServerThread() as server:
        finished = subprocess.run(
            [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
             "--run-id", "smoke", "--output", str(folder / "run"), "--lean-url", server.url,
             "--set", f"schedule.total_steps={STEPS}", "--set", f"rollout.prompts_per_step={PROMPTS}",
             "--set", f"rollout.samples_per_prompt={SAMPLES}", "--set", f"optimizer.mini_batch_prompts={PROMPTS}"],
            cwd=REPOSITORY, capture_output=True, text=True, timeout=800)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [json.loads(line) for line in finished.stdout.splitlines()]


def rollouts(events, turn):
    return [event["payload"] for event in events
            if event["type"] == "rollout_finished" and event["payload"]["turn"] == turn
            and not event["payload"]["is_evaluation"]]


def test_the_run_starts_from_the_cached_smoke_model(smoke_run_events):
    started = next(event for event in smoke_run_events if event["type"] == "run_started")
    assert started["payload"]["config"]["model"]["source"] == "tiny_format"
    assert started["payload"]["config"]["model"]["init_checkpoint"] == str(smoke_model_folder())


def test_most_first_attempts_pass_the_format_check_and_are_sent_to_lean(smoke_run_events):
    first = rollouts(smoke_run_events, "first")
    assert len(first) + len(rollouts(smoke_run_events, "retry")) == STEPS * PROMPTS * SAMPLES  # retries take slots
    sent_to_lean = [rollout for rollout in first if rollout["verdict"] is not None]
    assert all(rollout["format_error"] is None for rollout in sent_to_lean)
    assert len(sent_to_lean) > len(first) / 2, [rollout["format_error"] for rollout in first]
    assert all(rollout["is_standin_verdict"] for rollout in sent_to_lean)


def test_some_answers_earn_one_and_some_lean_rejects(smoke_run_events):
    verdicts = [rollout["verdict"] for rollout in rollouts(smoke_run_events, "first")]
    rewards = [rollout["reward"] for rollout in rollouts(smoke_run_events, "first")]
    assert rewards.count(1.0) >= 1, verdicts
    assert "lean_error" in verdicts, verdicts


def test_rejected_first_attempts_become_retries_that_are_sampled_and_checked(smoke_run_events):
    created = [event["payload"] for event in smoke_run_events if event["type"] == "retry_created"]
    assert created, "no rejected first attempt became a retry"
    first_keys = {rollout["rollout_key"]: rollout for rollout in rollouts(smoke_run_events, "first")}
    assert all(first_keys[retry["parent_rollout_key"]]["verdict"] == "lean_error" for retry in created)
    sampled = rollouts(smoke_run_events, "retry")
    assert sampled and {retry["parent_rollout_key"] for retry in sampled} <= {retry["parent_rollout_key"] for retry in created}


def test_a_second_build_finds_the_cached_model_and_returns_at_once(smoke_run_events):
    folder = smoke_model_folder()
    modified = (folder / "config.json").stat().st_mtime
    assert build_smoke_model() == folder
    assert (folder / "config.json").stat().st_mtime == modified
