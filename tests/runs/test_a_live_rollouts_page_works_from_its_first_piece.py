"""A rollout's own page (/runs/<id>/rollouts/<key>/) works from the moment the answer starts streaming: it says
"being written" until the rollout is stored, then sends the reader to the proof attempt's page."""

import pytest
from django.conf import settings

from runs.ingest import EventIngester
from tests.runs.event_helpers import publisher_for, rollout, wait_for
from trainer.observability.events import EventType
from trainer.observability.live import LiveRollouts, RedisLiveSink

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "a1-s1-p0-r0"


def start_writing(run):
    publisher = publisher_for(run)
    publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk))
    LiveRollouts(publisher.publish_live, lambda p, s: (KEY, 1, "add_small", "first"), interval_s=0.0,
                 max_rollouts=8).update(0, 0, 5, lambda: "<think>let me <b>see</b>")
    wait_for(lambda: publisher.live.sent == 1, 10, "the live sink")
    return publisher


def test_while_the_answer_is_written_its_page_says_so_and_carries_its_text_escaped(client, alice, make_run, redis_client):
    run = make_run(state="running")
    start_writing(run)
    client.force_login(alice)
    response = client.get(f"/runs/{run.pk}/rollouts/{KEY}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "being written" in page
    assert "<b>see</b>" not in page and "\\u003Cb\\u003Esee" in page  # model output only inside json_script, escaped


def test_once_stored_its_page_sends_the_reader_to_the_proof_attempt(client, alice, make_run, redis_client):
    run = make_run(state="running")
    publisher = start_writing(run)
    publisher.publish(EventType.ROLLOUT_FINISHED, rollout(key=KEY))
    EventIngester(block_ms=50).poll_once()
    client.force_login(alice)
    response = client.get(f"/runs/{run.pk}/rollouts/{KEY}/")
    assert response.status_code == 302 and response["Location"].startswith("/proofs/")


def test_an_answer_neither_written_nor_stored_and_a_strangers_look_are_not_found(client, alice, charlie, make_run, redis_client):
    run = make_run(state="running")
    client.force_login(alice)
    assert client.get(f"/runs/{run.pk}/rollouts/{KEY}/").status_code == 404
    start_writing(run)
    client.force_login(charlie)
    assert client.get(f"/runs/{run.pk}/rollouts/{KEY}/").status_code == 404
