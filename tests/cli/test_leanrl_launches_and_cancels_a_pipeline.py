"""``leanrl pipelines launch …`` launches an expert-iteration pipeline through the same checks as its form and the API
(each stage's launch fields bounded by the runs' launch contract), and ``leanrl pipelines cancel`` ends it with its run."""

from __future__ import annotations

import json

import pytest

from pipelines.models import Pipeline, PipelineState
from tests.pipelines.conftest import SMOKE_STATEMENTS, make_version

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_pipeline_is_launched_shown_and_cancelled_from_the_terminal(alice, platform_processes, leanrl):
    from accounts.models import ApiToken, TokenScope

    training = make_version(alice, "terminal training", SMOKE_STATEMENTS[:2])
    benchmark = make_version(alice, "terminal bench", SMOKE_STATEMENTS[2:3])
    _, token = ApiToken.issue(alice, "terminal", scope=TokenScope.LAUNCH)
    assert leanrl("login", "--server", platform_processes["url"], "--token", token).returncode == 0
    fields = leanrl("pipelines", "launch", "--fields")
    assert "benchmark_version_id" in fields.stdout and "rl_fields" in fields.stdout

    common = [f"training_version_id={training.pk}", f"benchmark_version_id={benchmark.pk}", "preset=cpu-smoke"]
    refused = leanrl("pipelines", "launch", "name=too long", *common, 'rl_fields={"total_steps": 100000}')
    assert refused.returncode != 0 and "rl_fields" in refused.stderr and "total_steps" in refused.stderr
    assert not Pipeline.objects.exists()

    launched = leanrl("pipelines", "launch", "name=terminal loop", *common, 'rl_fields={"total_steps": 2}',
                      "max_iterations=1")
    assert launched.returncode == 0, launched.stderr
    pipeline = Pipeline.objects.get(pk=int(launched.stdout.split()[1]))
    assert pipeline.rl_fields == {"total_steps": 2} and pipeline.max_iterations == 1
    shown = json.loads(leanrl("pipelines", "show", str(pipeline.pk)).stdout)
    assert shown["id"] == pipeline.pk and shown["state"] == "running"

    cancelled = leanrl("pipelines", "cancel", str(pipeline.pk))
    assert cancelled.returncode == 0 and "cancelled" in cancelled.stdout
    pipeline.refresh_from_db()
    assert pipeline.state == PipelineState.CANCELLED
