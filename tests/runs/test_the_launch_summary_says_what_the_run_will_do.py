"""Before a launch, the page and ``GET /api/runs/launch-summary`` say what the run will do: the resolved config's key
figures, its GPUs and the memory plan's verdict, the most proofs sent to Lean a step, and for a CPU preset a step
time estimated from its measured run, labelled as an estimate ("not measured" where no run was measured)."""

import pytest

from runs.models import LearnerPlan, Run
from tests.memory.tiny_gpu import tiny_gpu_sections
from trainer.config import PRESETS, RunConfig
from trainer.step_time.inputs import MEASURED_RUNS

pytestmark = pytest.mark.django_db


def launch_summary(client, **fields):
    response = client.get("/api/runs/launch-summary", fields)
    assert response.status_code == 200, response.content
    return response.json()


def row(summary: dict, label: str) -> dict:
    return next(item for item in summary["summary"] if item["label"] == label)


@pytest.mark.parametrize("fields", [{"preset": "cpu-smoke"},
                                    {"preset": "cpu-demo", "prompts_per_step": 2, "samples_per_prompt": 3,
                                     "learning_rate": 3e-5, "rollout_engine": "vllm", "model": "tiny-smoke-llama"}])
def test_the_summarys_config_is_the_one_a_launch_of_the_same_fields_stores(alices_client, promptset_version,
                                                                          dispatched, fields):
    summarised = launch_summary(alices_client, **fields)
    launched = alices_client.post("/api/runs/", {"name": "launched", "promptset_version_id": promptset_version.pk,
                                                 **fields}, content_type="application/json")
    assert launched.status_code == 201, launched.content
    assert summarised["config"] == Run.objects.get().public_config


def test_each_figure_of_the_summary_is_the_resolved_configs(alices_client):
    for preset in PRESETS:
        summary = launch_summary(alices_client, preset=preset)
        config = summary["config"]
        figures = [item for item in summary["summary"] if item["path"]]
        assert len(figures) >= 12
        for item in figures:
            section, field = item["path"].split(".")
            value = config[section][field]
            shown = item["value"].replace(",", "")
            if value is None:
                assert shown.startswith("none"), item
            elif isinstance(value, str):
                assert shown == value, item
            else:
                assert float(shown) == value, item


def test_the_proofs_sent_to_lean_a_step_are_at_most_the_prompts_times_their_answers(alices_client):
    lean = row(launch_summary(alices_client, preset="cpu-demo", prompts_per_step=6, samples_per_prompt=3),
               "Proofs sent to Lean per step")
    assert lean["value"] == "at most 18" and lean["figure"] == "18"
    assert "6 × 3" in lean["note"] and "format check never reaches Lean" in lean["note"]


@pytest.mark.parametrize("preset", sorted(MEASURED_RUNS))
def test_a_cpu_presets_step_time_is_an_estimate_from_its_measured_run_and_says_so(alices_client, preset):
    step_time = row(launch_summary(alices_client, preset=preset), "Step time")
    assert step_time["value"].startswith("about ")
    assert step_time["note"].startswith("an estimate, not a measurement") and MEASURED_RUNS[preset] in step_time["note"]


def test_a_preset_never_measured_says_not_measured(alices_client):
    assert row(launch_summary(alices_client, preset="h100x8"), "Step time")["value"] == "not measured"


def test_a_cpu_run_holds_no_gpu_and_fits(alices_client):
    summary = launch_summary(alices_client, preset="cpu-demo")
    assert row(summary, "GPUs")["value"] == "0" and "on CPU" in row(summary, "GPUs")["note"]
    assert row(summary, "Memory plan")["value"] == "fits: a CPU run holds no GPU memory"


def test_a_gpu_runs_verdict_waits_for_its_plan_then_reads_it(alices_client, monkeypatch):
    from runs import launch_contract

    monkeypatch.setitem(PRESETS, "tiny-gpu", tiny_gpu_sections())
    monkeypatch.setitem(launch_contract.PRESET_BOUNDS, "tiny-gpu", launch_contract.PRESET_BOUNDS["h100x8"])
    assert row(launch_summary(alices_client, preset="tiny-gpu"), "Memory plan")["value"].startswith("not planned yet")
    LearnerPlan.objects.for_config(RunConfig.from_preset("tiny-gpu"))  # as the launch, or `manage.py plan_presets`
    verdict = row(launch_summary(alices_client, preset="tiny-gpu"), "Memory plan")["value"]
    assert verdict.startswith("fits: at most ") and "GiB per GPU" in verdict
    monkeypatch.setitem(PRESETS, "tiny-gpu", tiny_gpu_sections(cluster={"gpu_memory_gib": 0.5}))
    assert row(launch_summary(alices_client, preset="tiny-gpu"), "Memory plan")["value"].startswith(
        "the launch would refuse it: ")


def test_fields_a_launch_would_refuse_are_named_with_what_is_allowed(alices_client):
    response = alices_client.get("/api/runs/launch-summary", {"preset": "cpu-demo", "prompts_per_step": 999})
    assert response.status_code == 422
    assert response.json()["field_errors"] == {
        "prompts_per_step": ["must be from 1 to 32 for the cpu-demo preset (got 999)"]}
    response = alices_client.get("/api/runs/launch-summary", {"preset": "cpu-demo", "prompts_per_step": 3})
    assert response.status_code == 422 and "must be a multiple of" in str(response.json()["field_errors"])
