"""The model against this machine's measured CPU runs: inputs fitted from a run's events predict that run's
step time, in sample and out of sample (odd steps predict even ones, and back); the CPU presets' inputs are
exactly those fits, read from the files, never copied."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.config import RunConfig
from trainer.step_time.calibration import calibrate, fit_inputs, measured_run, read_events
from trainer.step_time.inputs import MEASURED_RUNS, preset_inputs

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "docs" / "demo-curve-events.jsonl"
SMOKE = REPO / "docs" / "step-time" / "cpu-smoke-sync-events.jsonl"


def test_the_synchronous_cpu_demo_runs_step_time_is_predicted_within_ten_percent():
    result = calibrate(DEMO)
    assert result.eta == 0 and result.steps == 20
    # The measured figure is the run's own: the mean interval between its consecutive metrics events.
    events = read_events(DEMO)
    times = [event["time"] for event in events if event["type"] == "metrics"]
    assert result.measured_step_s == pytest.approx((times[-1] - times[0]) / (len(times) - 1))
    assert abs(result.error) < 0.10, result.to_json()
    # Out of sample, half the steps predict the other half (10 steps of 6–14 s each): within 25%.
    assert len(result.held_out) == 2
    assert all(abs(row["error"]) < 0.25 for row in result.held_out), result.held_out


def test_the_synchronous_cpu_smoke_runs_step_time_is_predicted_within_ten_percent():
    result = calibrate(SMOKE)
    assert abs(result.error) < 0.10, result.to_json()


def test_a_fit_reads_the_runs_own_figures():
    run = measured_run(read_events(DEMO))
    inputs = fit_inputs(run)
    steps = sorted(run.step_intervals_s)
    assert steps == list(range(2, 21))
    assert inputs.weight_sync_s == pytest.approx(sum(run.phases[s]["time/weight_sync_s"] for s in steps) / len(steps))
    tokens = sum(r["num_tokens"] for r in run.rollouts if r["step"] in steps)
    learning = sum(run.phases[s]["time/learning_s"] for s in steps)
    assert inputs.learner_tokens_per_s_per_device == pytest.approx(tokens / learning)
    reached = [r for r in run.rollouts if r["step"] in steps and r["verdict"] is not None]
    assert inputs.lean_reach_share == pytest.approx(len(reached) / (16 * len(steps)))


@pytest.mark.parametrize("preset", sorted(MEASURED_RUNS))
def test_a_cpu_presets_inputs_are_its_measured_runs_fit(preset):
    config = RunConfig.from_preset(preset)
    fitted = fit_inputs(read_events(REPO / MEASURED_RUNS[preset]))
    inputs = preset_inputs(config)
    assert inputs.decode_tokens_per_s_per_sequence == fitted.decode_tokens_per_s_per_sequence
    assert inputs.learner_tokens_per_s_per_device == fitted.learner_tokens_per_s_per_device
    assert inputs.answer_tokens.observed == fitted.answer_tokens.observed
    assert inputs.sources["decode_tokens_per_s_per_sequence"].startswith(f"measured: {MEASURED_RUNS[preset]}")


def test_an_asynchronous_runs_eta_and_layout_are_read_from_its_events(tmp_path):
    # The lead's asynchronous loop records rollout.max_staleness in run_started's config; calibrate simulates it.
    events = [json.loads(line) for line in SMOKE.read_text().splitlines()]
    for event in events:
        if event["type"] == "run_started":
            event["payload"]["config"]["rollout"]["max_staleness"] = 1
    relabelled = tmp_path / "eta1.jsonl"
    relabelled.write_text("".join(json.dumps(event) + "\n" for event in events))
    result = calibrate(relabelled)
    assert result.eta == 1
    assert "step_overhead_s" in result.inputs.sources
    assert "not separable in an asynchronous run" in result.inputs.sources["step_overhead_s"]


@pytest.mark.parametrize("run", [DEMO, SMOKE])
def test_the_sizing_page_quotes_the_calibration_as_measured_here(run):
    result = calibrate(run)
    row = next(line for line in (REPO / "docs" / "operations" / "sizing.md").read_text().splitlines()
               if line.startswith("| cpu-") and f"`{run.relative_to(REPO)}`" in line)
    error = f"{result.error:+.1%}".replace("-", "−")
    for seconds in (result.measured_step_s, result.predicted_step_s):
        shown = f"{seconds:.1f} s" if seconds >= 10 else f"{seconds:.2f} s"
        assert f"| {shown} |" in row, (row, shown)
    assert f"| {error} |" in row, (row, error)
    held_out = ", ".join(f"{item['error']:+.1%}".replace("-", "−") for item in result.held_out)
    assert row.rstrip(" |").endswith(held_out), (row, held_out)
