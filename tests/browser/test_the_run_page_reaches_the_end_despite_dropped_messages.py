"""The channel layer drops messages for a slow client; the run page still shows every event once, in order,
and reaches the run's end: it sees a gap in the numbers and fetches what it missed, and a quiet page asks."""

from concurrent.futures import ThreadPoolExecutor

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from runs.ingest import browser_message
from runs.models import RunEvent
from tests.browser.conftest import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def store(run, number, type="log", **payload):
    payload = payload or {"level": "info", "message": f"line {number}"}
    return RunEvent.objects.create(run=run, event_id=f"{run.pk}-{number}", seq=number, run_seq=number, type=type,
                                   payload=payload, published_at=timezone.now())


def forward(run, *events):
    """What the ingester sends; leaving events out is what the channel layer does to a slow client.
    (In a thread of its own: Playwright's event loop runs in this one.)"""
    message = {"type": "run.events", "events": [browser_message(e) for e in events]}
    with ThreadPoolExecutor(1) as pool:
        pool.submit(async_to_sync(get_channel_layer().group_send), run.group_name, message).result()


def shown_log_lines(page):
    return page.locator("#logs li .message").all_inner_texts()


def test_a_gap_in_the_numbers_is_filled_from_the_api_in_order(page, alice, make_run):
    run = make_run(state="running", name="gappy")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")

    events = [store(run, number) for number in range(1, 6)]
    forward(run, events[0])
    forward(run, events[3])  # 2 and 3 were dropped
    forward(run, events[4])
    page.wait_for_selector("body[data-last-event-number='5']", timeout=5000)
    assert shown_log_lines(page) == [f"line {n}" for n in range(1, 6)]

    forward(run, events[2], events[4])  # late copies: shown once
    page.wait_for_timeout(500)
    assert shown_log_lines(page) == [f"line {n}" for n in range(1, 6)]


def test_a_run_whose_last_messages_were_all_dropped_still_ends_on_the_page(page, alice, make_run):
    run = make_run(state="running", name="silent end")
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")

    RunEvent.objects.bulk_create([
        RunEvent(run=run, event_id=f"{run.pk}-{n}", seq=n, run_seq=n, type="log",
                 payload={"level": "info", "message": f"line {n}"}, published_at=timezone.now())
        for n in range(1, 1301)])  # more than one page of the API
    store(run, 1301, type="run_finished", status="succeeded", reason="")
    run.transition("succeeded", reason="the trainer finished")
    # Nothing forwarded at all: the quiet page asks the API (every 10 s), page by page.
    page.wait_for_selector("#run-state.state-succeeded", timeout=20000)
    page.wait_for_selector("body[data-last-event-number='1301']", timeout=5000)
    assert page.locator("#run-state").inner_text() == "Succeeded"
    # The last log line, then the run's end as a milestone of the log (the run page's log shows both).
    assert shown_log_lines(page)[-2:] == ["line 1300", "run succeeded after step ?"]
