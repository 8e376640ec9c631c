"""A queued run says why it waits in one place (the run page's note, from /api/runs/<id>/waiting): the
scheduler's reason until it is admitted, then that it waits for a worker."""

import pytest
from django.urls import reverse

from runs import scheduling
from runs.models import QueueState

pytestmark = pytest.mark.django_db


def test_a_run_the_scheduler_holds_gives_the_schedulers_reason_and_nothing_else(alices_client, make_run, dispatched):
    QueueState.objects.create(pk=1, is_paused=True, reason="cluster maintenance")
    run = make_run()
    scheduling.schedule()
    answer = alices_client.get(f"/api/runs/{run.pk}/waiting").json()
    assert answer == {"state": "queued",
                      "reason": "In the queue: the queue is paused by an administrator: cluster maintenance."}
    page = alices_client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert "the queue is paused" not in page  # the note, filled from the API, says it once
    assert dispatched == []


def test_an_admitted_run_says_it_waits_for_a_worker(alices_client, make_admitted_run):
    run = make_admitted_run()
    answer = alices_client.get(f"/api/runs/{run.pk}/waiting").json()
    assert answer["reason"] == "Queued: admitted, waiting for a platform worker to submit it to the Ray cluster."


def test_a_queued_run_the_scheduler_has_not_looked_at_yet_says_so(alices_client, make_run):
    run = make_run()
    assert alices_client.get(f"/api/runs/{run.pk}/waiting").json()["reason"] == "In the queue: waiting for the scheduler."
