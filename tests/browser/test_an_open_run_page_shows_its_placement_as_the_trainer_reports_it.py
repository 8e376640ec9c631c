"""A run page left open follows the run's placement live, over its Channels group: the waiting placement group's
GPUs and each node's free GPUs appear without a reload, then, once placed, each actor's node (issue 46). Sent the
trainer's way, onto the run's stream, for the platform's own ingester and web server."""

import pytest

from tests.browser.conftest import log_in
from tests.browser.trainer_events import publish
from trainer.observability.events import EventType, Placement

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BUNDLES = [{"role": "learner", "gpus": 1, "cpus": 1}, {"role": "rollout engine", "gpus": 1, "cpus": 1}]


def test_the_attempts_list_says_what_the_run_waits_for_then_where_each_actor_runs(page, alice, make_run):
    run = make_run(state="running", name="spread")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    assert page.get_attribute("#attempt-1", "data-placement") == "not reported"

    publish(run, EventType.PLACEMENT, Placement(
        state="waiting", gpus_wanted=2, cpus_wanted=2, bundles=BUNDLES,
        free_per_node=[{"node_id": "a1b2c3d4e5f6a7b8", "node_ip": "10.0.0.2", "gpus_free": 1.0, "cpus_free": 3.0},
                       {"node_id": "f0e1d2c3b4a5f6e7", "node_ip": "10.0.0.3", "gpus_free": 0.0, "cpus_free": 2.0}],
    ).model_dump(mode="json"))
    page.wait_for_selector('#attempt-1[data-placement="waiting"]', timeout=30_000)
    waiting = page.inner_text("#attempt-1")
    assert "wants 2 GPUs and 2 CPUs in 2 bundles" in waiting and "10.0.0.3" in waiting
    assert page.is_visible("#cancel-waiting-run")

    publish(run, EventType.PLACEMENT, Placement(
        state="placed", gpus_wanted=2, cpus_wanted=2, bundles=BUNDLES,
        actors=[{"name": "learner rank 0", "node_id": "a1b2c3d4e5f6a7b8", "node_ip": "10.0.0.2", "bundle": 0},
                {"name": "rollout engine 0", "node_id": "f0e1d2c3b4a5f6e7", "node_ip": "10.0.0.3", "bundle": 1}],
    ).model_dump(mode="json"))
    page.wait_for_selector('#attempt-1[data-placement="placed"]', timeout=30_000)
    rows = page.locator("#attempt-1 .placed-actors tbody tr").all_inner_texts()
    assert [row.split("\t")[0] for row in rows] == ["learner rank 0", "rollout engine 0"]
    assert "10.0.0.3" in rows[1] and not page.is_visible("#cancel-waiting-run")
