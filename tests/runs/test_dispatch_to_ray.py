"""Dispatch against the real local Ray head: submit, cancel (jobs that die without a word: test_sweeper_*)."""

import json

import pytest

from runs import actions
from runs.models import RunState
from tests.runs.jobs import running_job_of_a_shell_trainer, wait_for_job

pytestmark = pytest.mark.django_db(transaction=True)


def test_dispatch_exports_the_inputs_and_submits_a_ray_job(make_admitted_run, ray_head, settings):
    settings.TRAINER_PYTHON = "/bin/true"  # a job that succeeds at once; the trainer itself is tested elsewhere
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.STARTING and run.attempt == 1, run.failure_reason
    assert run.ray_job_id == f"run-{run.pk}-attempt-1"
    assert run.cluster["address"] == ray_head.address
    rows = [json.loads(line) for line in (run.artifacts_dir / "promptset.jsonl").read_text().splitlines()]
    assert [row["problem_id"] for row in rows] == ["add_small", "mul_small", "lt_small"]
    assert json.loads((run.artifacts_dir / "config.json").read_text())["preset"] == "cpu-demo"
    wait_for_job(run.ray_job_id, {"SUCCEEDED"})


def test_a_cluster_that_cannot_be_reached_fails_the_run_at_dispatch(make_admitted_run, settings, monkeypatch):
    settings.RAY_ADDRESS = "http://127.0.0.1:9"  # nothing listens on the discard port
    monkeypatch.setenv("RAY_ADDRESS", settings.RAY_ADDRESS)  # Ray's client reads it before its argument
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.FAILED
    assert "could not submit the run to the Ray cluster at http://127.0.0.1:9" in run.failure_reason


def test_cancel_stops_the_ray_job(make_admitted_run, ray_head, settings, tmp_path):
    run = running_job_of_a_shell_trainer(make_admitted_run, settings, tmp_path / "slow-trainer", "sleep 600\n")
    assert actions.cancel_run(run)
    wait_for_job(run.ray_job_id, {"STOPPED"})
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED


def test_a_run_that_is_not_queued_is_not_dispatched_twice(make_run, settings):
    run = make_run(state="running")
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.attempt == 1 and run.ray_job_id == "" and run.state == RunState.RUNNING


def test_a_queued_run_the_scheduler_has_not_admitted_is_not_dispatched(make_run):
    run = make_run()  # waiting in the queue (a paused queue, a full quota), and a dispatch arrives anyway
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.QUEUED and run.attempt == 1 and run.ray_job_id == ""
    assert list(run.state_changes.values_list("state", flat=True)) == []


def test_a_run_the_cluster_cannot_hold_fails_before_submission_with_the_reason(make_admitted_run, ray_head):
    from trainer.config import RunConfig

    run = make_admitted_run(config=RunConfig.from_preset("h100x8").to_json_dict(), preset="h100x8")
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.FAILED and run.ray_job_id == ""
    assert "the run asks for 8 GPUs (cluster.num_gpus)" in run.failure_reason


def test_a_job_is_handed_the_compile_caches_the_platform_keeps(make_admitted_run, ray_head, settings, tmp_path):
    # make run keeps them in its data folder, so a run after the first loads vLLM's compiled graphs (deploy/stack.py).
    settings.COMPILE_CACHE_ENVIRONMENT = {"VLLM_CACHE_ROOT": str(tmp_path / "vllm"),
                                          "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    settings.TRAINER_PYTHON = str(tmp_path / "trainer")
    seen = tmp_path / "seen"
    (tmp_path / "trainer").write_text(f'#!/bin/sh\necho "$VLLM_CACHE_ROOT $TORCHINDUCTOR_CACHE_DIR" > {seen}\n')
    (tmp_path / "trainer").chmod(0o755)
    run = make_admitted_run()
    actions.dispatch(run.pk)
    run.refresh_from_db()
    wait_for_job(run.ray_job_id, {"SUCCEEDED"})
    assert seen.read_text().split() == [str(tmp_path / "vllm"), str(tmp_path / "inductor")]
