"""Whose verdicts make a proof (pipelines/corpus.py): a pipeline's verifier is fixed by its first harvest; a real-Lean
pipeline never counts a stand-in acceptance, and a stand-in pipeline fails rather than mix in real Lean verdicts."""

import pytest

from pipelines import actions
from pipelines.advance import advance
from pipelines.models import Pipeline, PipelineState
from tests.pipelines.conftest import add_attempt, end_run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def artifacts(settings, tmp_path):
    settings.ARTIFACTS_DIR = tmp_path


def test_a_harvest_judged_by_real_lean_never_joins_a_standin_corpus(alice, dispatched, pipeline_request):
    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    Pipeline.objects.filter(pk=pipeline.pk).update(verified_by="stand-in")
    advance(pipeline.pk)
    harvest = pipeline.current_iteration.harvest_run
    add_attempt(harvest, "smoke_nat_add", accepted=True, standin=False)
    end_run(harvest)
    advance(pipeline.pk)
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.FAILED
    assert "never mixes" in pipeline.failure_reason and pipeline.current_iteration.corpus is None


def test_a_real_lean_pipeline_never_counts_a_standin_acceptance_as_a_proof(alice, dispatched, pipeline_request):
    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    advance(pipeline.pk)
    harvest = pipeline.current_iteration.harvest_run
    add_attempt(harvest, "smoke_nat_add", accepted=True, standin=False)
    add_attempt(harvest, "smoke_rat_add", accepted=True, standin=True)
    end_run(harvest)
    advance(pipeline.pk)
    pipeline.refresh_from_db()
    corpus = pipeline.current_iteration.corpus
    assert pipeline.verified_by == corpus.verified_by == "lean"
    assert list(corpus.proofs.values_list("problem_key", flat=True)) == ["smoke_nat_add"]


def test_an_answer_that_failed_the_format_check_is_the_models_zero_whoever_verifies(alice, dispatched, pipeline_request):
    from runs.models import Checkpoint

    pipeline = actions.launch_pipeline(owner=alice, request=pipeline_request)
    advance(pipeline.pk)
    harvest = pipeline.current_iteration.harvest_run
    add_attempt(harvest, "smoke_nat_add", accepted=True)
    malformed = add_attempt(harvest, "smoke_rat_add", accepted=False, standin=False)
    type(malformed).objects.filter(pk=malformed.pk).update(verdict="", format_error="no_valid_think_block")
    end_run(harvest)
    advance(pipeline.pk)
    pipeline.refresh_from_db()
    assert pipeline.verified_by == "stand-in"  # the malformed answer reached no verifier: it is no Lean verdict
    iteration = pipeline.current_iteration
    for stage_run in ("sft_run", "rl_run"):
        end_run(getattr(iteration, stage_run), checkpoint_step=1)
        advance(pipeline.pk)
        iteration.refresh_from_db()
    benchmark = iteration.benchmark_run
    malformed = add_attempt(benchmark, "bench_square", accepted=False, standin=False)
    type(malformed).objects.filter(pk=malformed.pk).update(verdict="", format_error="no_valid_think_block")
    end_run(benchmark)
    advance(pipeline.pk)
    iteration.refresh_from_db()
    assert (iteration.benchmark_solved, iteration.benchmark_problems) == (0, 1)  # measured: a 0, not "not measured"
    assert Checkpoint.objects.exists()
