"""A run launched on the platform with tracking on logs the same step metrics to its tracker as its
run page shows, and the run page links to the tracker and to the job in Ray's dashboard."""

import time

import pytest
from django.conf import settings
from django.test import Client

from runs import actions
from runs.models import RunState
from trainer.observability.tracking import scalars

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_tracked_run_holds_the_same_step_metrics_in_tensorboard_as_on_its_run_page(
        alice, promptset_version, platform_processes, platform_logs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run = actions.launch_run(owner=alice, request={"name": "tracked", "promptset_version_id": promptset_version.pk,
                                                   "preset": "cpu-smoke", "tracking": ["tensorboard"]})
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.is_final:
            break
        time.sleep(0.5)
    assert run.state == RunState.SUCCEEDED, f"{run.state}: {run.failure_reason}\n{platform_logs()}"

    board = EventAccumulator(str(run.artifacts_dir / "tensorboard"), size_guidance={"scalars": 0})
    board.Reload()
    page_series = {row.step: scalars(row.values) for row in run.step_metrics.all()}
    assert sorted(page_series) == [1, 2]
    for step, values in page_series.items():
        for name, value in values.items():
            logged = {event.step: event.value for event in board.Scalars(name)}
            assert logged[step] == pytest.approx(value, rel=1e-6), (name, step)

    client = Client()
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert f'TensorBoard: <code>{run.artifacts_dir / "tensorboard"}</code>' in page
    assert f'href="{settings.RAY_DASHBOARD_URL}/#/jobs/{run.ray_job_id}"' in page
