"""The pipeline's state machine (pipelines/advance.py), stage by stage, with each stage's run ended the way the
ingester ends it: harvest (an evaluation on the training promptset), the proof corpus, SFT on it, RL on a curated
version, the benchmark, then the next iteration from the last model. Advancing twice never launches twice.
The whole path through Celery, Ray and the stand-in:
tests/pipelines/test_a_two_iteration_cpu_smoke_pipeline_runs_end_to_end_through_the_platform.py."""

import json
from pathlib import Path

import pytest

from pipelines import actions
from pipelines.advance import advance
from pipelines.models import Pipeline, PipelineState, Stage
from runs.models import Run
from tests.pipelines.conftest import add_attempt, end_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def artifacts(settings, tmp_path):
    settings.ARTIFACTS_DIR = tmp_path


def test_each_stage_is_a_run_launched_once_and_the_next_starts_from_its_model(alice, dispatched, pipeline_request):
    response_pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    advance(response_pipeline.pk)
    advance(response_pipeline.pk)  # a second look while the harvest runs changes nothing
    pipeline = Pipeline.objects.get(pk=response_pipeline.pk)
    iteration = pipeline.current_iteration
    harvest = iteration.harvest_run
    assert (harvest.kind, harvest.promptset_version_id) == ("eval", pipeline.training_version_id)
    assert harvest.resolved_config.schedule.eval_samples == 2
    assert Run.objects.count() == 1

    for _ in range(2):
        add_attempt(harvest, "smoke_nat_add", accepted=True)  # the same proof twice: kept once
    add_attempt(harvest, "smoke_rat_add", accepted=True, tactic="norm_num")
    add_attempt(harvest, "smoke_rat_add", accepted=False, tactic="omega")
    add_attempt(harvest, "smoke_false_mul", accepted=False)
    add_attempt(harvest, "smoke_int_sub", accepted=False, censored=True)  # censored: no proof, and not a failure
    end_run(harvest)
    advance(pipeline.pk)

    iteration.refresh_from_db()
    pipeline.refresh_from_db()
    assert pipeline.verified_by == "stand-in"
    corpus = iteration.corpus
    assert (corpus.proof_count, corpus.added_count, corpus.duplicate_count) == (2, 2, 1)
    assert iteration.problems_unsolved == 2  # smoke_int_sub (censored) and smoke_false_mul
    sft = iteration.sft_run
    assert (sft.kind, sft.demonstrations_path) == ("sft", corpus.path)
    rows = [json.loads(line) for line in Path(corpus.path).read_text().splitlines()]
    assert {row["problem_id"] for row in rows} == {"smoke_nat_add", "smoke_rat_add"}
    assert all(row["verified_by"] == "stand-in" and "```lean4" in row["response"] for row in rows)

    end_run(sft, checkpoint_step=2)
    advance(pipeline.pk)
    iteration.refresh_from_db()
    rl = iteration.rl_run
    assert rl.kind == "rl" and rl.starting_checkpoint == sft.checkpoints.get()
    assert iteration.rl_version.rule["kind"] == "drop_above_win_rate"
    assert iteration.rl_version.rule["win_rate_source"] == "platform"
    kept = set(iteration.rl_version.problems.values_list("problem_key", flat=True))
    assert "smoke_nat_add" not in kept  # solved 2 of 2: nothing left to learn
    assert {"smoke_rat_add", "smoke_false_mul", "smoke_int_sub"} <= kept  # half, never, and not yet measured

    end_run(rl, checkpoint_step=2)
    advance(pipeline.pk)
    iteration.refresh_from_db()
    benchmark = iteration.benchmark_run
    assert benchmark.promptset_version_id == pipeline.benchmark_version_id
    assert benchmark.starting_checkpoint == rl.checkpoints.get()

    add_attempt(benchmark, "bench_square", accepted=True)
    end_run(benchmark)
    advance(pipeline.pk)
    first, second = pipeline.iterations.order_by("number")
    assert (first.stage, first.benchmark_solved, first.benchmark_problems) == (Stage.DONE, 1, 1)
    assert "no gain to measure" in first.plateau_verdict
    assert second.harvest_run.starting_checkpoint == rl.checkpoints.get()  # iteration 2 harvests with the RL model


def test_a_failed_stage_fails_the_pipeline_and_a_retry_launches_it_again(alice, dispatched, pipeline_request):
    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    advance(pipeline.pk)
    failed = pipeline.current_iteration.harvest_run
    end_run(failed, "failed", reason="the Ray head went away")
    advance(pipeline.pk)
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.FAILED
    assert f"run {failed.pk} ended failed (the Ray head went away)" in pipeline.failure_reason

    assert actions.retry_stage(pipeline)
    advance(pipeline.pk)
    pipeline.refresh_from_db()
    retried = pipeline.current_iteration.harvest_run
    assert pipeline.state == PipelineState.RUNNING and retried.pk != failed.pk and retried.is_active


def test_cancelling_the_pipeline_cancels_its_current_run(alice, dispatched, pipeline_request):
    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    advance(pipeline.pk)
    assert actions.cancel_pipeline(pipeline)
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.CANCELLED
    assert pipeline.current_iteration.harvest_run.state == "cancelled"
    advance(pipeline.pk)
    assert Run.objects.count() == 1  # a cancelled pipeline launches nothing more
