"""An engine the node cannot run is replaced only by the fallback the config names (rollout.engine_fallback; the
cpu-demo preset names transformers for nodes without vLLM's CPU build), and the run says so: a warning in its log
and the choice in run_started, which the run page shows. Without a named fallback the run fails at start-up."""

from __future__ import annotations

import json

import pytest

from trainer.config import RolloutEngineKind, RunConfig
from trainer.rollout.vllm_platform import choose_rollout_engine


def test_the_cpu_demo_asks_for_vllm_and_names_transformers_as_its_fallback():
    rollout = RunConfig.from_preset("cpu-demo").rollout
    assert (rollout.engine, rollout.engine_fallback) == (RolloutEngineKind.VLLM, RolloutEngineKind.TRANSFORMERS)


def test_where_vllm_cpu_runs_the_run_samples_with_vllm(vllm_cpu):
    config = RunConfig.from_preset("cpu-demo")
    chosen, choice = choose_rollout_engine(config)
    assert chosen is config
    assert (choice.engine, choice.reason, choice.sentence) == ("vllm", None, "samples with vllm")


def test_without_vllm_cpu_the_cpu_demo_samples_with_its_fallback_and_says_why(without_vllm_cpu):
    chosen, choice = choose_rollout_engine(RunConfig.from_preset("cpu-demo"))
    assert chosen.rollout.engine is RolloutEngineKind.TRANSFORMERS
    assert (choice.asked, choice.engine) == ("vllm", "transformers")
    assert "needs vLLM's CPU build (vllm-cpu" in choice.reason and "not installed" in choice.reason
    assert choice.sentence.startswith("samples with transformers, the fallback its config names "
                                      "(rollout.engine_fallback), not vllm: rollout.engine is 'vllm'")


def test_without_a_named_fallback_the_run_fails_with_the_fix(without_vllm_cpu):
    config = RunConfig.from_preset("cpu-demo", {"rollout": {"engine_fallback": None}})
    with pytest.raises(RuntimeError, match=r"needs vLLM's CPU build.*set rollout.engine to 'transformers'"):
        choose_rollout_engine(config)


def test_choosing_transformers_on_the_cpu_demo_needs_no_other_setting():
    config = RunConfig.from_preset("cpu-demo", {"rollout": {"engine": "transformers"}})
    chosen, choice = choose_rollout_engine(config)
    assert chosen is config and (choice.engine, choice.reason) == ("transformers", None)


def test_a_run_that_falls_back_trains_and_says_so_in_its_log_and_its_start(without_vllm_cpu, standin_url, tmp_path,
                                                                          capsys):
    from trainer.__main__ import main as trainer_main

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    code = trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
                         "--set", "rollout.engine=vllm", "--set", "rollout.engine_fallback=transformers",
                         "--set", "schedule.total_steps=1", "--set", "rollout.prompts_per_step=1",
                         "--set", "optimizer.mini_batch_prompts=1", "--set", f"verifier.url={standin_url}"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert code == 0, events[-1]["payload"]
    started = next(event for event in events if event["type"] == "run_started")
    assert started["payload"]["rollout_engine"]["engine"] == "transformers"
    assert started["payload"]["config"]["rollout"]["engine"] == "transformers"
    warnings = [event["payload"]["message"] for event in events
                if event["type"] == "log" and event["payload"].get("level") == "warning"]
    assert any(message.startswith("this run samples with transformers, the fallback its config names") for message in warnings)
    assert events[-1]["payload"]["status"] == "succeeded"
