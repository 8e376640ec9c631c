"""The attempt after a failure of the infrastructure meets a cluster short of the node it lost (a node restarting,
an autoscaler's replacement booting): dispatch submits it anyway and its placement group waits for the node, as the
run's page says; failing it as "the cluster cannot run this configuration" would spend the retry the failure earned
on the failure itself. After a failure of the run's own code, the same shortfall still fails the run at dispatch.

The real Ray head of the test session (no GPU in all), a run asking for 2 logical GPUs (two learner ranks: its
driver holds none, so its job runs at once; the trainer is /bin/true, the trainer itself is tested elsewhere)."""

import pytest
from django.utils import timezone

from runs import actions
from runs.models import Attempt, AttemptCause, RunState
from tests.runs.jobs import wait_for_job
from trainer.config import RunConfig

pytestmark = pytest.mark.django_db(transaction=True)

TWO_RANKS = RunConfig.from_preset("cpu-smoke", {"cluster": {"num_gpus": 2, "cpus_per_worker": 1}}).to_json_dict()


def second_attempt_after(make_admitted_run, cause: str):
    run = make_admitted_run(config=TWO_RANKS, preset="cpu-smoke", attempt=2)
    Attempt.objects.create(run=run, number=1, ended_state=RunState.FAILED, cause=cause, ended_at=timezone.now(),
                           reason="node 3f2a9c1e (10.0.0.7) died: learner rank 1 was lost")
    return run


def test_after_a_lost_node_the_attempt_is_submitted_to_wait_for_the_node(make_admitted_run, ray_head, settings):
    settings.TRAINER_PYTHON = "/bin/true"
    run = second_attempt_after(make_admitted_run, AttemptCause.INFRASTRUCTURE)
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.STARTING, run.failure_reason
    assert run.ray_job_id == f"run-{run.pk}-attempt-2"
    wait_for_job(run.ray_job_id, {"SUCCEEDED"})


def test_after_a_failure_of_the_runs_code_the_shortfall_fails_the_run_with_the_reason(make_admitted_run, ray_head):
    run = second_attempt_after(make_admitted_run, AttemptCause.RUN)
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.state == RunState.FAILED and run.ray_job_id == ""
    assert "the run asks for 2 GPUs (cluster.num_gpus)" in run.failure_reason
