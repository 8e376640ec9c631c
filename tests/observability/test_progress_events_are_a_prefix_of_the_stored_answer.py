"""``python -m trainer run --events stdout`` prints each answer's text while it is written (``rollout_progress``),
before the answer is stored, in pieces that joined by offset are a prefix of the stored response."""

from __future__ import annotations

import json
from collections import defaultdict

from trainer.__main__ import main as trainer_main
from trainer.verification.standin_server import StandinServerThread


def test_every_rollout_streams_before_it_is_stored_and_its_pieces_are_a_prefix_of_its_response(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(json.dumps({"problem_id": f"p{i}", "formal_statement": f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by"}) + "\n"
                                 for i in range(3)))
    with StandinServerThread() as server:
        # The untrained tiny model: it writes all 256 tokens, long enough to stream in several pieces (the smoke
        # model's answers are 50 tokens, often written within one progress interval).
        code = trainer_main(["run", "--preset", "cpu-smoke", "--set", "rollout.max_response_tokens=256",
                             "--set", "model.source=tiny_random", "--set", "model.name_or_path=tiny-random-llama",
                             "--promptset", str(promptset), "--output", str(tmp_path / "run"), "--events", "stdout",
                             "--lean-url", server.url, "--run-id", "local"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert code == 0

    finished = {e["payload"]["rollout_key"]: index for index, e in enumerate(events) if e["type"] == "rollout_finished"}
    progress = defaultdict(list)
    for index, event in enumerate(events):
        if event["type"] == "rollout_progress":
            progress[event["payload"]["rollout_key"]].append((index, event))
    assert len(finished) == 8  # 2 steps × 2 prompts × 2 samples
    assert set(progress) == set(finished), "every rollout streams, and only rollouts that are then stored"
    for key, pieces in progress.items():
        assert all(index < finished[key] for index, _ in pieces), f"{key}: a piece came after the stored rollout"
        response = events[finished[key]]["payload"]["response"]
        joined = ""
        for _, event in pieces:
            assert event["payload"]["offset"] == len(joined), f"{key}: a piece's offset is not the text before it"
            assert event["seq"] == -1, "progress takes no number in the run's sequence of stored events"
            joined += event["payload"]["text"]
        assert response.startswith(joined)
        assert pieces[-1][1]["payload"]["is_finished"] and joined == response
        assert pieces[-1][1]["payload"]["tokens"] == events[finished[key]]["payload"]["num_tokens"]
    assert any(len(pieces) > 2 for pieces in progress.values()), "text arrives while it is written, not only at the end"
    stored_numbers = [e["seq"] for e in events if e["type"] != "rollout_progress"]
    assert stored_numbers == list(range(len(stored_numbers))), "progress leaves no gap in the stored events' numbers"


def test_a_periodic_evaluations_answers_stream_before_each_is_stored(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "p0", "formal_statement": "theorem t0 : (0 : ℕ) + 1 = 1 := by"}) + "\n")
    with StandinServerThread() as server:
        code = trainer_main(["run", "--preset", "cpu-smoke", "--set", "rollout.max_response_tokens=64",
                             "--set", "schedule.total_steps=1", "--set", "schedule.eval_every=1",
                             "--promptset", str(promptset), "--output", str(tmp_path / "run"), "--events", "stdout",
                             "--lean-url", server.url])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert code == 0
    evaluation = next(index for index, e in enumerate(events) if e["type"] == "evaluation")
    streamed = {e["payload"]["rollout_key"] for e in events[:evaluation]
                if e["type"] == "rollout_progress" and e["payload"]["is_finished"]}
    assert {key for key in streamed if key.startswith("a1-eval1-p0-")} == {"a1-eval1-p0-r0", "a1-eval1-p0-r1"}
    stored = {e["payload"]["rollout_key"]: index for index, e in enumerate(events)
              if e["type"] == "rollout_finished" and e["payload"]["is_evaluation"]}
    assert {"a1-eval1-p0-r0", "a1-eval1-p0-r1"} <= set(stored)
    first_streamed = {}
    for index, event in enumerate(events):
        if event["type"] == "rollout_progress":
            first_streamed.setdefault(event["payload"]["rollout_key"], index)
    assert all(first_streamed[key] < stored[key] for key in stored), "each sample streams before it is stored"


def test_an_evaluation_runs_answers_stream_before_each_is_stored(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "p0", "formal_statement": "theorem t0 : (0 : ℕ) + 1 = 1 := by"}) + "\n")
    with StandinServerThread() as server:
        code = trainer_main(["evaluate", "--preset", "cpu-smoke", "--set", "rollout.max_response_tokens=64",
                             "--set", "schedule.eval_samples=2", "--promptset", str(promptset),
                             "--output", str(tmp_path / "eval"), "--events", "stdout", "--lean-url", server.url])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert code == 0
    stored = {e["payload"]["rollout_key"]: index for index, e in enumerate(events) if e["type"] == "rollout_finished"}
    streamed = {}
    for index, event in enumerate(events):
        if event["type"] == "rollout_progress":
            streamed.setdefault(event["payload"]["rollout_key"], index)
    assert len(stored) >= 2 and set(stored) <= set(streamed)
    assert all(streamed[key] < stored[key] for key in stored), "each sample streams before it is stored"
