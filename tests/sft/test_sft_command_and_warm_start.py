"""``python -m trainer sft`` as the platform calls it, and the cpu-demo warm start's build and cache."""

from __future__ import annotations

import json

import pytest

from tests.sft.conftest import nat_sum_problems, tiny_config
from trainer.__main__ import main as trainer_main

TINY_SFT = [
    "--preset", "cpu-demo",
    "--set", "model.source=tiny_random", "--set", "sft.epochs=1", "--set", "sft.batch_sequences=2",
    "--set", "sft.micro_batch_sequences=2",
]


def events_from(output: str) -> list[dict]:
    return [json.loads(line) for line in output.splitlines() if line.startswith("{")]


def test_sft_from_a_promptset_generates_demonstrations_and_names_the_model_rl_can_start_from(tmp_path, capsys):
    from trainer.config import ModelConfig
    from trainer.learning.models import load_policy

    promptset = tmp_path / "promptset.jsonl"
    promptset.write_text("".join(json.dumps(p.to_dict(), ensure_ascii=False) + "\n" for p in nat_sum_problems([(2, 3), (4, 5)])))
    output = tmp_path / "run"
    code = trainer_main(["sft", *TINY_SFT, "--promptset", str(promptset), "--per-problem", "1",
                         "--output", str(output), "--events", "stdout", "--run-id", "42"])
    events = events_from(capsys.readouterr().out)
    assert code == 0, events[-1]
    assert [event["type"] for event in events] == ["run_started", "metrics", "checkpoint_saved", "run_finished"]
    assert {event["run_id"] for event in events} == {"42"}
    assert events[0]["payload"]["kind"] == "sft" and events[0]["payload"]["demonstrations"] == 2
    values = events[1]["payload"]["values"]
    assert values["sft_loss"] > 0 and values["tokens_per_second"] > 0
    assert len((output / "demonstrations.jsonl").read_text().splitlines()) == 2
    finished = events[-1]["payload"]
    assert finished["status"] == "succeeded"
    lineage = json.loads((output / "checkpoints" / "step_000001" / "trainer_state.json").read_text())["lineage"]
    assert lineage["kind"] == "sft" and lineage["base_model_source"] == "tiny_random"
    model, tokenizer = load_policy(ModelConfig(source="tiny_random", init_checkpoint=finished["model_path"]))
    assert tokenizer.eos_token_id is not None and model.config.hidden_size == 64


def test_a_malformed_demonstrations_file_fails_the_run_with_the_line_and_the_fix(tmp_path, capsys):
    demonstrations = tmp_path / "demos.jsonl"
    demonstrations.write_text('{"formal_statement": "theorem t : (1 : ℕ) = 1 := by"}\n')
    code = trainer_main(["sft", *TINY_SFT, "--demonstrations", str(demonstrations), "--output", str(tmp_path / "o")])
    events = events_from(capsys.readouterr().out)
    assert code == 4  # malformed input (trainer/command_line.py lists the codes)
    assert events[-1]["type"] == "run_finished" and events[-1]["payload"]["status"] == "failed"
    assert "line 1" in events[-1]["payload"]["reason"] and "'response'" in events[-1]["payload"]["reason"]


def test_a_promptset_outside_the_fragment_is_refused_before_any_training(tmp_path, capsys):
    promptset = tmp_path / "promptset.jsonl"
    promptset.write_text(json.dumps({"problem_id": "x", "formal_statement": "theorem x (a : ℝ) : 0 ≤ a ^ 2 := by"}) + "\n")
    code = trainer_main(["sft", *TINY_SFT, "--promptset", str(promptset), "--output", str(tmp_path / "o")])
    assert code == 2
    assert "--demonstrations FILE" in events_from(capsys.readouterr().out)[-1]["payload"]["reason"]


@pytest.fixture
def tiny_warm_start(monkeypatch):
    import deploy.warm_start as warm_start

    monkeypatch.setattr(warm_start, "warm_start_config", lambda: tiny_config(
        sft={"learning_rate": 1e-3, "epochs": 1, "batch_sequences": 4, "micro_batch_sequences": 4}))
    monkeypatch.setattr(warm_start, "DEMONSTRATION_PROBLEMS", 4)
    return warm_start


def test_the_warm_start_is_built_once_under_the_data_dir_and_found_again(tiny_warm_start, tmp_path, capsys):
    data_dir = tmp_path / "var"
    path = tiny_warm_start.warm_start_checkpoint_path(data_dir)
    assert path.is_relative_to(data_dir / "warm-start")
    assert tiny_warm_start.warm_start_status(data_dir)["state"] == "absent"

    assert tiny_warm_start.build_warm_start(data_dir) == path
    # Its progress on standard error, as `trainer sft` shows it: a line per step where that is a log.
    progress = capsys.readouterr().err.splitlines()
    # First the precision the builder chose on this machine (trainer/compute_dtype.py), then the steps.
    assert progress[0].startswith("warm start (SFT of SmolLM2 on demonstrations): computes in ")
    assert progress[1].startswith("warm start (SFT of SmolLM2 on demonstrations): step 1/")
    assert "sft_loss" in progress[1] and progress[-1].endswith("succeeded at step 1")
    assert (path / "config.json").is_file()
    # Built, but not ready until vLLM is compiled for it (main's second half): a run would wait for that.
    assert tiny_warm_start.warm_start_status(data_dir)["state"] == "compiling"
    build_dir = tiny_warm_start.warm_start_build_dir(data_dir)
    assert not (build_dir / "sft").exists()  # the optimizer-laden checkpoints are gone once exported
    events_written = (build_dir / "events.jsonl").read_text()

    assert tiny_warm_start.main(["--data-dir", str(data_dir), "--quiet"]) == 0
    assert (build_dir / "events.jsonl").read_text() == events_written  # found, not rebuilt
    assert tiny_warm_start.warm_start_status(data_dir) == {"state": "ready", "path": str(path)}


def test_the_warm_start_path_changes_when_the_recipe_does(tiny_warm_start, tmp_path, monkeypatch):
    before = tiny_warm_start.warm_start_checkpoint_path(tmp_path)
    monkeypatch.setattr(tiny_warm_start, "FLAWED_SHARE", 0.5)
    assert tiny_warm_start.warm_start_checkpoint_path(tmp_path) != before


def test_a_float32_build_and_a_bfloat16_build_are_different_folders(tmp_path, monkeypatch):
    # The cpu-demo preset asks for auto: the folder keys on what this machine resolves it to.
    import deploy.warm_start as warm_start
    from trainer import compute_dtype
    from trainer.compute_dtype import CpuReport, resolve_compute_dtype

    def path_on(report: CpuReport):
        monkeypatch.setattr(compute_dtype, "cpu_report", lambda: report)
        resolve_compute_dtype.cache_clear()
        return warm_start.warm_start_checkpoint_path(tmp_path)

    try:
        avx2 = path_on(CpuReport(capability="AVX2", has_avx512_bf16=False, has_amx_tile=False, onednn_cap=None))
        avx512_bf16 = path_on(CpuReport(capability="AVX512", has_avx512_bf16=True, has_amx_tile=False, onednn_cap=None))
        amx = path_on(CpuReport(capability="AVX512", has_avx512_bf16=True, has_amx_tile=True, onednn_cap=None))
    finally:
        resolve_compute_dtype.cache_clear()
    assert avx2 != avx512_bf16 == amx  # float32 against bfloat16; two bfloat16 CPUs share one build


def test_the_warm_start_path_follows_the_sft_settings_but_not_the_rl_learning_rate(tiny_warm_start, tmp_path, monkeypatch):
    before = tiny_warm_start.warm_start_checkpoint_path(tmp_path)
    config = tiny_warm_start.warm_start_config()
    monkeypatch.setattr(tiny_warm_start, "warm_start_config", lambda: config.model_copy(update={
        "optimizer": config.optimizer.model_copy(update={"learning_rate": 7e-5, "warmup_steps": 9})}))
    assert tiny_warm_start.warm_start_checkpoint_path(tmp_path) == before  # RL settings: the same model
    monkeypatch.setattr(tiny_warm_start, "warm_start_config", lambda: config.model_copy(update={
        "optimizer": config.optimizer.model_copy(update={"weight_decay": 0.5})}))
    assert tiny_warm_start.warm_start_checkpoint_path(tmp_path) != before  # the SFT's AdamW: a new model
