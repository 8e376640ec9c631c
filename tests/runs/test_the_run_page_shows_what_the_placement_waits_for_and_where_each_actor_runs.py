"""The PLACEMENT event on the run page: while the run's placement group waits, what it waits for (GPUs wanted,
free per node) and a cancel that ends the run at once; once placed, which node each actor is on.

The trainer's own EventPublisher into the run's real Redis stream, the real ingester keeping the attempt's
latest placement (the driver's learner ranks and learner rank 0's rollout engines merged by name), the run's
Channels group hearing it as it hears every event, and the real Ray head stopping the cancelled run's job.
"""

from __future__ import annotations

import re

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

from runs.ingest import EventIngester
from runs.models import Attempt, RunState
from tests.runs.jobs import running_job_of_a_shell_trainer, wait_for_job
from trainer.observability.events import EventPublisher, EventType, Placement, RedisStreamSink

pytestmark = pytest.mark.django_db(transaction=True)

BUNDLES = [{"role": "learner", "gpus": 1, "cpus": 4}, {"role": "learner", "gpus": 1, "cpus": 4},
           {"role": "rollout engine", "gpus": 2, "cpus": 8}]
WAITING = Placement(state="waiting", gpus_wanted=4, cpus_wanted=16, bundles=BUNDLES, free_per_node=[
    {"node_id": "a1b2c3d4e5f6a7b8c9d0", "node_ip": "10.0.0.2", "gpus_free": 1.0, "cpus_free": 12.0},
    {"node_id": "f0e1d2c3b4a5f6e7d8c9", "node_ip": "10.0.0.3", "gpus_free": 2.0, "cpus_free": 3.5}])
LEARNERS_PLACED = Placement(state="placed", gpus_wanted=4, cpus_wanted=16, bundles=BUNDLES, actors=[
    {"name": "learner rank 0", "node_id": "a1b2c3d4e5f6a7b8c9d0", "node_ip": "10.0.0.2", "bundle": 0},
    {"name": "learner rank 1", "node_id": "a1b2c3d4e5f6a7b8c9d0", "node_ip": "10.0.0.2", "bundle": 1}])
ENGINES_PLACED = Placement(state="placed", gpus_wanted=4, cpus_wanted=16, bundles=BUNDLES, actors=[
    {"name": "rollout engine 0 <script>alert(1)</script>", "node_id": "f0e1d2c3b4a5f6e7d8c9", "node_ip": "10.0.0.3",
     "bundle": 2}])


@pytest.fixture(autouse=True)
def clean_streams():
    yield
    client = redis.Redis.from_url(django_settings.REDIS_URL)
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


def publish(run, *placements: Placement) -> None:
    publisher = EventPublisher(str(run.pk), RedisStreamSink(django_settings.REDIS_URL, str(run.pk)),
                               attempt=run.attempt)
    for placement in placements:
        publisher.publish(EventType.PLACEMENT, placement)
    EventIngester(consumer="test").poll_once()


def attempt_item(page: str, number: int) -> str:
    return re.search(rf'<li id="attempt-{number}".*?</li>', page, re.S).group(0)


def test_a_waiting_run_says_how_many_gpus_it_wants_and_what_each_node_has_free(make_run, alices_client):
    run = make_run(state="running")
    publish(run, WAITING)
    assert Attempt.objects.get(run=run, number=1).placement["state"] == "waiting"
    item = attempt_item(alices_client.get(run.get_absolute_url()).content.decode(), 1)
    assert "its placement group wants 4 GPUs and 16 CPUs in 3 bundles" in item
    assert "rollout engine: 2 GPUs, 8 CPUs" in item
    assert re.search(r"<td>10\.0\.0\.2</td><td>1</td><td>12</td>", item)
    assert re.search(r"<td>10\.0\.0\.3</td><td>2</td><td>3\.5</td>", item)
    assert 'id="cancel-waiting-run"' in item


def test_once_placed_the_page_names_each_actors_node_the_driver_and_rank_0_merged_by_name(make_run, alices_client):
    run = make_run(state="running")
    publish(run, WAITING, LEARNERS_PLACED, ENGINES_PLACED)
    actors = Attempt.objects.get(run=run, number=1).placement["actors"]
    assert [actor["name"] for actor in actors] == ["learner rank 0", "learner rank 1",
                                                   "rollout engine 0 <script>alert(1)</script>"]
    item = attempt_item(alices_client.get(run.get_absolute_url()).content.decode(), 1)
    assert "Waiting for the cluster" not in item and "cancel-waiting-run" not in item
    assert "<td>learner rank 1</td><td><code>a1b2c3d4e5f6…</code></td><td>10.0.0.2</td><td>1</td>" in item
    # Whatever the trainer sends is text on the page, never markup.
    assert "<td>rollout engine 0 &lt;script&gt;alert(1)&lt;/script&gt;</td>" in item and "<script>alert" not in item


def test_a_placement_reaches_the_runs_channels_group_like_every_event(make_run):
    run = make_run(state="running")
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run.group_name, channel)
    publish(run, WAITING)
    message = async_to_sync(layer.receive)(channel)
    [event] = message["events"]
    assert event["type"] == "placement" and event["payload"]["free_per_node"][1]["gpus_free"] == 2.0


def test_a_placement_of_an_earlier_attempt_changes_nothing(make_run, alices_client):
    run = make_run(state="running", attempt=2)
    EventPublisher(str(run.pk), RedisStreamSink(django_settings.REDIS_URL, str(run.pk)), attempt=1).publish(
        EventType.PLACEMENT, WAITING)
    EventIngester(consumer="test").poll_once()
    assert not Attempt.objects.filter(run=run).exists()


def test_cancel_while_waiting_ends_the_run_at_once_and_stops_its_ray_job(make_admitted_run, ray_head, settings,
                                                                       tmp_path, alices_client):
    run = running_job_of_a_shell_trainer(make_admitted_run, settings, tmp_path / "trainer", "sleep 600\n")
    publish(run, WAITING)
    page = alices_client.get(run.get_absolute_url()).content.decode()
    cancel = re.search(r'<form method="post" action="([^"]+)" data-confirm="Cancel “[^"]+” instead of waiting for '
                       r'its GPUs\?[^"]*">[^<]*<input[^>]*>\s*<button type="submit" id="cancel-waiting-run"',
                       attempt_item(page, 1))
    response = alices_client.post(cancel.group(1))
    assert response.status_code == 302
    run.refresh_from_db()
    assert run.state == RunState.CANCELLED  # at once: the platform does not wait for Ray
    assert Attempt.objects.get(run=run, number=1).outcome == "cancelled"
    assert wait_for_job(run.ray_job_id, {"STOPPED"}).state == "STOPPED"
    item = attempt_item(alices_client.get(run.get_absolute_url()).content.decode(), 1)
    assert "Waiting for the cluster" not in item and "Ended" in item
