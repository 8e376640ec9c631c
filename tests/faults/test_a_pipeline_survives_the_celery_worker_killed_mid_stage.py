"""The Celery worker killed mid-stage, twice (while the SFT stage's run trains, and again as the RL stage's run is
launched), and restarted by the stack's supervisor: the pipeline resumes from the database and ends as the
uninterrupted one does, with the same figures and the same proof corpus, and no stage ran twice."""

import pytest
from django.test import Client

from pipelines.models import Iteration, Pipeline, PipelineState, Stage
from runs.models import RunState
from tests.faults.conftest import db_retry, kill, wait_until
from tests.pipelines.test_a_two_iteration_cpu_smoke_pipeline_runs_end_to_end_through_the_platform import (
    launch_pipeline,
)

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]

PIPELINE_DEADLINE_S = 1200


def outcome(pipeline: Pipeline) -> dict:
    """What a pipeline ended with: its state, each iteration's figures, and each corpus's proofs (ids and owners
    aside)."""
    pipeline.refresh_from_db()
    return {
        "state": pipeline.state,
        "iterations": [(row.number, row.proofs_harvested, row.corpus.proof_count, row.corpus.refused_count,
                        row.problems_unsolved, row.benchmark_solved, row.plateau_verdict,
                        sorted(row.rl_version.problems.values_list("problem_key", flat=True)))
                       for row in pipeline.iterations.order_by("number")],
        "corpora": [sorted((proof.problem_key, proof.row["response"]) for proof in corpus.proofs.all())
                    for corpus in pipeline.corpora.order_by("number")],
        "runs_per_iteration": [sum(1 for run in (row.harvest_run, row.sft_run, row.rl_run, row.benchmark_run) if run)
                               for row in pipeline.iterations.order_by("number")],
    }


def run_to_the_end(pipeline: Pipeline, logs) -> dict:
    wait_until(lambda: Pipeline.objects.get(pk=pipeline.pk).state != PipelineState.RUNNING,
               f"pipeline {pipeline.pk} to end", logs, deadline_s=PIPELINE_DEADLINE_S, every_s=0.5)
    return db_retry(lambda: outcome(pipeline))


def test_a_pipeline_resumes_after_the_worker_is_killed_mid_stage_and_ends_as_the_uninterrupted_one(
        alice, bob, supervised_platform, platform_logs):
    # Two owners: the RL stage's promptset reads the win rates of the runs its owner may see, so a pipeline of the
    # same owner would read the first one's runs too and could not end the same.
    bobs, alices = Client(), Client()
    bobs.force_login(bob)
    alices.force_login(alice)
    undisturbed = run_to_the_end(launch_pipeline(bobs, bob, name="undisturbed", max_iterations=1), platform_logs)
    assert undisturbed["state"] == PipelineState.SUCCEEDED, platform_logs()

    disturbed = launch_pipeline(alices, alice, name="disturbed", max_iterations=1)
    sft_running = wait_until(
        lambda: Iteration.objects.filter(pipeline=disturbed, number=1, sft_run__state=RunState.RUNNING).first(),
        "the first SFT stage's run to train", platform_logs, deadline_s=PIPELINE_DEADLINE_S, every_s=0.2)
    kill(supervised_platform["celery-worker"])  # its run ends while no worker is there to hear of it
    wait_until(lambda: Iteration.objects.filter(pk=sft_running.pk, rl_run__isnull=False).exists(),
               "the RL stage to be launched after the restart", platform_logs, deadline_s=PIPELINE_DEADLINE_S,
               every_s=0.05)
    kill(supervised_platform["celery-worker"])  # and again, as it may be dispatching the RL stage's run

    assert run_to_the_end(disturbed, platform_logs) == undisturbed
    assert Iteration.objects.get(pk=sft_running.pk).stage == Stage.DONE
