"""Through the platform: a run launched from the form lands on two nodes and its page shows where each rank runs;
a node lost after the first checkpoint ends the attempt within 30 s as a failure of the infrastructure, naming the
node; the platform starts the next attempt by itself, on a node added back, which resumes from the checkpoint; the
run ends succeeded with every step, and its page lists both attempts and why the first ended.

The real stack of the test session (PostgreSQL, Redis, the Celery worker, the ingester, the sweeper, the suite's
Ray head with its job API, the stand-in Lean server, never real Lean) and two worker nodes joined to that head as
an operator joins them (``ray start --address``), each of one logical GPU: CPU processes stand in for the GPUs
(trainer/ranks.py CPU_STANDS_IN_FOR_GPUS). The run is a synchronous data-parallel cpu-smoke run of two learner
ranks (cluster.num_gpus 2, which no launch field sets: the preset's, as the h100x8 preset's 8 are), so the node
removed is learner rank 1's. The trainer's side alone is tested in
test_a_lost_learner_node_fails_the_attempt_as_infrastructure_and_the_next_attempt_resumes.py.
"""

from __future__ import annotations

import re
import time

import pytest
from django.test import Client
from django.urls import reverse

from promptsets.versions import create_smoke_promptset
from runs import actions
from runs.models import FINAL_STATES, Attempt, AttemptCause, Run, RunEvent, RunState, StepMetrics
from tests.faults.conftest import wait_until
from tests.placement.ray_nodes import JoinedNode, head_alive_node_ids
from trainer.config import PRESETS, _deep_merge

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

STEPS = 4
RETRY_FIRST_DELAY_S = 1


@pytest.fixture
def two_gpu_smoke_preset(monkeypatch):
    """cpu-smoke on two logical GPUs of one CPU each: two learner ranks, synchronous data-parallel. Set in this
    process, where the form's view resolves the run's config and stores it; every other process reads the stored
    config (the dispatch writes it for the trainer)."""
    monkeypatch.setitem(PRESETS, "cpu-smoke", _deep_merge(PRESETS["cpu-smoke"],
                                                          {"cluster": {"num_gpus": 2, "cpus_per_worker": 1}}))


@pytest.fixture
def short_back_off(platform_processes):
    """RUN_RETRY_FIRST_DELAY_S of 1 s in the ingester, the process that ends an attempt from the trainer's
    RUN_FINISHED and schedules its retry: restarted with it, and restarted as it was afterwards."""
    ingester = platform_processes["ingester"]
    before = dict(ingester.env)
    ingester.env = {**before, "RUN_RETRY_FIRST_DELAY_S": str(RETRY_FIRST_DELAY_S)}
    ingester.stop()
    ingester.start()
    yield
    ingester.env = before
    ingester.stop()
    ingester.start()


@pytest.fixture
def worker_nodes(ray_head):
    """Worker nodes joined to the suite's Ray head; every one removed at the end, so the head is left as it was."""
    joined = []
    before = sorted(head_alive_node_ids(ray_head))

    def join() -> JoinedNode:
        joined.append(JoinedNode(ray_head, gpus=1, cpus=1))
        return joined[-1]

    yield join
    for node in joined:
        node.remove()
    deadline = time.monotonic() + 60
    while sorted(head_alive_node_ids(ray_head)) != before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert sorted(head_alive_node_ids(ray_head)) == before, "the joined worker nodes outlived the test"


def placed_actors(run: Run, attempt: int) -> list[dict] | None:
    placement = Attempt.objects.filter(run=run, number=attempt).values_list("placement", flat=True).first() or {}
    return placement.get("actors") if placement.get("state") == "placed" else None


def events_of(run: Run, attempt: int, event_type: str) -> list[dict]:
    return list(RunEvent.objects.filter(run=run, attempt=attempt, type=event_type).order_by("seq")
                .values_list("payload", flat=True))


def attempt_item(page: str, number: int) -> str:
    return re.search(rf'<li id="attempt-{number}".*?</li>', page, re.S).group(0)


def test_the_run_lands_on_two_nodes_and_the_next_attempt_resumes_on_a_node_added_back(
        alice, platform_processes, platform_logs, worker_nodes, two_gpu_smoke_preset, short_back_off):
    first_node, second_node = worker_nodes(), worker_nodes()
    client = Client()
    client.force_login(alice)
    smoke, _ = create_smoke_promptset(alice)
    response = client.post(reverse("runs:new"), {
        "name": "two nodes", "promptset_version": smoke.versions.get().pk, "preset": "cpu-smoke", "kind": "rl",
        "total_steps": STEPS, "checkpoint_every": 1, "infrastructure_retries": 1})
    assert response.status_code == 302, response.context["form"].errors if response.context else response.content
    run = Run.objects.get(name="two nodes")
    try:
        assert run.config["cluster"]["num_gpus"] == 2

        # Placed: one learner rank on each worker node, and the page says which.
        actors = wait_until(lambda: placed_actors(run, 1), "attempt 1's placement", platform_logs)
        assert [actor["name"] for actor in actors] == ["learner rank 0", "learner rank 1"]
        assert {actor["node_id"] for actor in actors} == {first_node.node_id, second_node.node_id}
        item = attempt_item(client.get(f"/runs/{run.pk}/").content.decode(), 1)
        for actor in actors:
            assert f"<td>{actor['name']}</td><td><code>{actor['node_id'][:12]}…</code></td>" in item, item

        # Learner rank 1's node removed after the first checkpoint.
        wait_until(lambda: events_of(run, 1, "checkpoint_saved"), "attempt 1's first checkpoint", platform_logs)
        lost = next(node for node in (first_node, second_node) if node.node_id == actors[1]["node_id"])
        removed_at = time.monotonic()
        lost.remove()
        wait_until(lambda: Attempt.objects.filter(run=run, number=1, ended_at__isnull=False).exists(),
                   "attempt 1 to end", platform_logs, deadline_s=60)
        ended_after_s = time.monotonic() - removed_at
        first = Attempt.objects.get(run=run, number=1)
        assert first.cause == AttemptCause.INFRASTRUCTURE, f"{first.reason}\n{platform_logs()}"
        assert first.reason.startswith(f"node {lost.node_id} ("), first.reason
        assert first.reason.endswith("died: learner rank 1 was lost"), first.reason
        assert ended_after_s < 30, f"attempt 1 ended {ended_after_s:.0f} s after its node was removed"
        assert first.retry_at is not None
        last_checkpoint = max(event["step"] for event in events_of(run, 1, "checkpoint_saved"))

        # The platform starts attempt 2 by itself; short of the lost node, it waits for one, and the page says so.
        wait_until(lambda: (Attempt.objects.filter(run=run, number=2).values_list("placement", flat=True).first()
                            or {}).get("state") == "waiting", "attempt 2 to wait for the cluster", platform_logs)
        assert "Waiting for the cluster: its placement group wants 2 GPUs" in attempt_item(
            client.get(f"/runs/{run.pk}/").content.decode(), 2)
        # A node added back: attempt 2 is placed on it and resumes from the checkpoint to the end.
        added = worker_nodes()
        wait_until(lambda: Run.objects.get(pk=run.pk).state in FINAL_STATES and Run.objects.get(pk=run.pk).attempt == 2,
                   "attempt 2 to end", platform_logs)
        run.refresh_from_db()
        assert run.state == RunState.SUCCEEDED, f"{run.failure_reason}\n{platform_logs()}"
        assert run.state_changes.filter(reason__startswith="retried automatically after a failure of the "
                                                             "infrastructure (retry 1 of 1)").exists()
        assert {actor["node_id"] for actor in placed_actors(run, 2)} == {
            (first_node if lost is second_node else second_node).node_id, added.node_id}
        assert [event["step"] for event in events_of(run, 2, "step_started")] == list(
            range(last_checkpoint + 1, STEPS + 1))
        [finished] = events_of(run, 2, "run_finished")
        assert (finished["status"], finished["step"]) == ("succeeded", STEPS)
        assert run.current_step == STEPS
        assert sorted(set(StepMetrics.objects.filter(run=run).values_list("step", flat=True))) == list(range(1, STEPS + 1))

        # The page lists both attempts and why the first ended.
        page = client.get(f"/runs/{run.pk}/").content.decode()
        ended = attempt_item(page, 1)
        assert f"failed: the infrastructure; retried automatically at {first.retry_at:%H:%M} UTC" in ended
        assert f"node {lost.node_id} (" in ended and "died: learner rank 1 was lost" in ended
        resumed = attempt_item(page, 2)
        assert '<span class="attempt-outcome">succeeded</span>' in resumed, resumed
        assert f"<td>learner rank 1</td><td><code>{placed_actors(run, 2)[1]['node_id'][:12]}…</code></td>" in resumed
    finally:
        run.refresh_from_db()
        if run.state not in FINAL_STATES:
            actions.cancel_run(run, reason="the test ended")
