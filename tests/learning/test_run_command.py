"""``python -m trainer run`` / ``export``: arguments to a run, events on stdout, exit codes."""

from __future__ import annotations

import json

import pytest

from trainer.__main__ import main as trainer_main
from trainer.commands.run import parse_overrides
from trainer.verification.standin_server import StandinServerThread


def events_from(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_set_overrides_nest_by_section_and_read_values_as_json():
    assert parse_overrides(["optimizer.learning_rate=1e-5", "model.source=tiny_random", "retry.enabled=false"]) == {
        "optimizer": {"learning_rate": 1e-5}, "model": {"source": "tiny_random"}, "retry": {"enabled": False},
    }


def test_a_set_override_without_a_section_is_refused_with_an_example():
    with pytest.raises(ValueError, match="--set optimizer.learning_rate=1e-5"):
        parse_overrides(["learning_rate=1e-5"])


def test_a_run_that_cannot_start_reports_failed_with_the_reason_and_exits_non_zero(tmp_path, capsys):
    code = trainer_main(["run", "--preset", "cpu-demo", "--promptset", str(tmp_path / "missing.jsonl"),
                         "--output", str(tmp_path / "out"), "--run-id", "7"])
    events = events_from(capsys.readouterr().out)
    assert code != 0
    assert events[-1]["type"] == "run_finished" and events[-1]["run_id"] == "7"
    assert events[-1]["payload"]["status"] == "failed"
    assert "missing.jsonl" in events[-1]["payload"]["reason"]


def test_a_bad_config_value_names_the_field(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "a", "formal_statement": "theorem a : (1 : ℕ) = 1 := by"}) + "\n")
    code = trainer_main(["run", "--preset", "cpu-demo", "--promptset", str(promptset), "--output", str(tmp_path / "o"),
                         "--set", "optimizer.learning_rate=-1"])
    assert code != 0
    assert "learning_rate" in events_from(capsys.readouterr().out)[-1]["payload"]["reason"]


def test_a_one_step_run_against_the_stand_in_prints_its_events_then_evaluates_and_exports(tmp_path, capsys):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    with StandinServerThread() as server:
        code = trainer_main([
            "run", "--preset", "cpu-demo", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
            "--lean-url", server.url, "--set", "model.source=tiny_random", "--set", "rollout.engine=transformers",
            "--set", "rollout.prompts_per_step=2",
            "--set", "rollout.samples_per_prompt=2", "--set", "rollout.max_response_tokens=4",
            "--set", "schedule.total_steps=1", "--set", "schedule.eval_every=0",
        ])
        events = events_from(capsys.readouterr().out)
        eval_code = trainer_main(["eval", "--checkpoint", str(tmp_path / "run"), "--promptset", str(promptset),
                                  "--lean-url", server.url, "--output", str(tmp_path / "samples-step0.jsonl")])
        evaluation = json.loads(capsys.readouterr().out)
        relabelled_code = trainer_main(["eval", "--checkpoint", str(tmp_path / "run"), "--promptset", str(promptset),
                                        "--lean-url", server.url, "--step", "5",
                                        "--output", str(tmp_path / "samples-step5.jsonl")])
        relabelled = json.loads(capsys.readouterr().out)
    assert code == 0
    types = [event["type"] for event in events]
    assert types[0] == "run_started" and types[-1] == "run_finished"
    assert types.count("rollout_finished") == 4 and "metrics" in types and "checkpoint_saved" in types
    assert json.loads((tmp_path / "run" / "run_config.json").read_text())["verifier"]["url"] == server.url
    # A tiny random model writes no proof: every attempt fails the format check and scores 0.
    metrics = evaluation["metrics"]
    assert eval_code == 0 and metrics["pass@1"] == 0.0 and metrics["problems"] == 1 and metrics["problems_scored"] == 1
    assert metrics["acc/pass@1"] == 0.0  # nor does Lean, without the format gate: there is no proof to check
    assert "best@2/mean" in metrics and "retry/pass@1" in metrics  # the preset evaluates 2 samples
    assert "censored" in evaluation["censored_handling"] and set(evaluation["metric_names"]) == {"pass@k", "acc/pass@k"}
    samples = [json.loads(line) for line in (tmp_path / "samples-step0.jsonl").read_text().splitlines()]
    assert [(s["problem_id"], s["turn"], s["sample_index"]) for s in samples] == [("add", "first", 0), ("add", "first", 1)]
    assert all(s["reward"] == 0.0 and s["lean_valid"] == 0.0 and s["format_error"] for s in samples)
    # --step labels the report; the sampling seed stays the config's.
    assert relabelled_code == 0 and relabelled["step"] == 5 and relabelled["seed"] == evaluation["seed"] == 0
    relabelled_samples = [json.loads(line) for line in (tmp_path / "samples-step5.jsonl").read_text().splitlines()]
    assert [s["response"] for s in relabelled_samples] == [s["response"] for s in samples]

    assert trainer_main(["export", "--checkpoint", str(tmp_path / "run"), "--out", str(tmp_path / "hf")]) == 0
    assert (tmp_path / "hf" / "model.safetensors").is_file() and (tmp_path / "hf" / "tokenizer.json").is_file()


def test_eval_of_a_model_without_its_run_config_says_to_pass_one(tmp_path, capsys):
    model = tmp_path / "exported"
    model.mkdir()
    (model / "config.json").write_text("{}")
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    code = trainer_main(["eval", "--checkpoint", str(model), "--promptset", str(promptset)])
    error = capsys.readouterr().err
    assert code == 2
    assert "run_config.json" in error and "--config" in error and "--preset" in error
