"""/api/runs/<id>/events?after=N: what a page that saw a gap fetches, a page at a time, with the run's state."""

import pytest
from django.utils import timezone

from runs.models import RunEvent
from runs.queries import EVENT_PAGE_LIMIT

pytestmark = pytest.mark.django_db


def store(run, count):
    RunEvent.objects.bulk_create([
        RunEvent(run=run, event_id=f"{run.pk}-{n}", seq=n * 4 + 1, run_seq=n, type="log", payload={"message": str(n)},
                 published_at=timezone.now()) for n in range(1, count + 1)])


def test_it_pages_through_the_events_after_a_number_in_order(make_run, client, alice):
    run = make_run(state="running")
    store(run, EVENT_PAGE_LIMIT + 20)
    client.force_login(alice)
    first = client.get(f"/api/runs/{run.pk}/events?after=3").json()
    assert [e["number"] for e in first["events"]] == list(range(4, 4 + EVENT_PAGE_LIMIT))
    assert first["has_more"] and first["last_number"] == EVENT_PAGE_LIMIT + 20 and first["state"] == "running"
    rest = client.get(f"/api/runs/{run.pk}/events?after={first['events'][-1]['number']}").json()
    assert [e["number"] for e in rest["events"]] == list(range(4 + EVENT_PAGE_LIMIT, EVENT_PAGE_LIMIT + 21))
    assert not rest["has_more"]


def test_a_page_is_never_longer_than_the_cap_whatever_is_asked(make_run, client, alice):
    run = make_run()
    store(run, EVENT_PAGE_LIMIT + 5)
    client.force_login(alice)
    assert len(client.get(f"/api/runs/{run.pk}/events?after=0&limit=100000").json()["events"]) == EVENT_PAGE_LIMIT
    assert len(client.get(f"/api/runs/{run.pk}/events?after=0&limit=7").json()["events"]) == 7


def test_it_says_the_state_of_a_run_that_ended_without_an_event(make_run, client, alice):
    run = make_run(state="running")
    run.mark_failed("the Ray job failed: out of memory")
    client.force_login(alice)
    page = client.get(f"/api/runs/{run.pk}/events?after=0").json()
    assert page["events"] == [] and page["state"] == "failed"
    assert page["failure_reason"] == "the Ray job failed: out of memory"


def test_a_stranger_gets_nothing(make_run, client, charlie):
    run = make_run()
    store(run, 3)
    client.force_login(charlie)
    assert client.get(f"/api/runs/{run.pk}/events?after=0").status_code == 404


def test_a_negative_after_is_refused_with_the_rule(make_run, client, alice):
    run = make_run()
    client.force_login(alice)
    response = client.get(f"/api/runs/{run.pk}/events?after=-1")
    assert response.status_code == 422 and "after must be 0 or more" in response.json()["detail"]
