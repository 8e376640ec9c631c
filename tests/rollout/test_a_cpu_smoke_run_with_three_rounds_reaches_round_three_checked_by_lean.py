"""`python -m trainer run --preset cpu-smoke --set retry.max_rounds=3`: rejected retries become the next round's
prompts, some problems reach round 3 and no further, every round's answers go to the (stand-in) Lean server, and
the metrics carry each round's accuracy, and its evaluation reports solved within r rounds for r = 1 … 3.

A real run of the trainer's own command with the smoke model (trainer/sft/smoke_model.py) and the stand-in Lean
server on a loopback port; ``retry.replay_probability=1`` so that a chain deepens every step and six steps
suffice. A rollout's round is read from the events alone: one more than the round of the answer it corrects
(``parent_rollout_key``), 0 for a first attempt.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from trainer.sft.smoke_model import write_smoke_promptset

pytestmark = pytest.mark.timeout(600)

REPOSITORY = Path(__file__).resolve().parents[2]
STEPS = 6


@pytest.fixture(scope="module")
def run_events(tmp_path_factory) -> list[dict]:
    from trainer.verification.standin_server import StandinServerThread

    folder = tmp_path_factory.mktemp("rounds-run")
    promptset = folder / "smoke.jsonl"
    write_smoke_promptset(promptset)
    with StandinServerThread() as server:
        finished = subprocess.run(
            [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
             "--output", str(folder / "run"), "--lean-url", server.url, "--set", f"schedule.total_steps={STEPS}",
             "--set", "retry.max_rounds=3", "--set", "retry.replay_probability=1.0",
             "--set", f"schedule.eval_every={STEPS}"],
            cwd=REPOSITORY, capture_output=True, text=True, timeout=500)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return [json.loads(line) for line in finished.stdout.splitlines()]


def answers_with_rounds(events) -> list[tuple[int, dict]]:
    answers = [event["payload"] for event in events if event["type"] == "rollout_finished"]
    by_key = {answer["rollout_key"]: answer for answer in answers}

    def round_of(answer) -> int:
        parent = answer["parent_rollout_key"]
        return 0 if parent is None else 1 + round_of(by_key[parent])

    return [(round_of(answer), answer) for answer in answers if not answer["is_evaluation"]]


def test_some_problems_reach_round_three_and_none_goes_further(run_events):
    rounds = Counter(round_of for round_of, _ in answers_with_rounds(run_events))
    assert rounds[3] > 0, rounds
    assert max(rounds) == 3


def test_every_rounds_well_formed_answers_are_checked_by_the_stand_in(run_events):
    for round_of, answer in answers_with_rounds(run_events):
        if answer["format_error"] is None:
            assert answer["verdict"] is not None and answer["is_standin_verdict"], (round_of, answer["rollout_key"])
    checked = {round_of for round_of, answer in answers_with_rounds(run_events) if answer["verdict"] is not None}
    assert checked == {0, 1, 2, 3}


def test_a_later_round_answers_the_problem_of_the_attempt_it_corrects(run_events):
    answers = dict((answer["rollout_key"], answer) for _, answer in answers_with_rounds(run_events))
    for round_of, answer in answers_with_rounds(run_events):
        if round_of:
            parent = answers[answer["parent_rollout_key"]]
            assert parent["problem_id"] == answer["problem_id"] and parent["verdict"] != "valid"


def test_the_metrics_carry_each_rounds_accuracy_and_answer_count_as_the_answers_show(run_events):
    answers = answers_with_rounds(run_events)
    for event in (event for event in run_events if event["type"] == "metrics"):
        step, values = event["payload"]["step"], event["payload"]["values"]
        in_step = [(round_of, answer) for round_of, answer in answers if answer["step"] == step]
        counts = Counter(str(round_of) for round_of, _ in in_step)
        assert values["rounds/rollouts"] == dict(counts)
        for name, count in counts.items():
            rewards = [answer["reward"] for round_of, answer in in_step
                       if str(round_of) == name and answer["reward"] is not None]
            assert values["rounds/accuracy"].get(name) == (sum(rewards) / len(rewards) if rewards else None)
    assert any("3" in event["payload"]["values"]["rounds/accuracy"] for event in run_events if event["type"] == "metrics")


def test_the_evaluation_reports_solved_within_each_round_beside_pass_at_k(run_events):
    (evaluation,) = [event["payload"]["values"] for event in run_events if event["type"] == "evaluation"]
    within = [evaluation[f"within_{rounds}_rounds/pass@1"] for rounds in (1, 2, 3)]
    assert within[0] == evaluation["retry/pass@1"]
    assert evaluation["pass@1"] <= within[0] <= within[1] <= within[2]
    samples = [event["payload"] for event in run_events
               if event["type"] == "rollout_finished" and event["payload"]["is_evaluation"]]
    assert any("-retry2-" in sample["rollout_key"] for sample in samples)  # a second round was evaluated
