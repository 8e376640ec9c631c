"""No entry can stop the ingester: what cannot be stored is kept with its error and acknowledged; the rest goes on."""

import json

import pytest

from proofs.models import ProofAttempt
from runs.entries import NUL_STAND_IN
from runs.ingest import EventIngester
from runs.models import DeadLetter, RunEvent, StepMetrics
from runs.streams import GROUP
from tests.runs.event_helpers import add_raw, event_json, publisher_for, rollout
from trainer.observability.events import EventType, stream_key

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(make_run):
    return make_run(state="running")


def pending(redis_client, run):
    return redis_client.xpending(stream_key(str(run.pk)), GROUP)["pending"]


def test_model_output_with_a_nul_character_is_stored_with_the_nul_shown_as_a_symbol(run, redis_client):
    publisher_for(run).publish(EventType.ROLLOUT_FINISHED, rollout(response="a\x00b", reasoning="\x00",
                                                                  lean_code="theorem x\x00 := by\n  simp"))
    EventIngester().poll_once()
    attempt = ProofAttempt.objects.get(run=run)
    assert attempt.response == f"a{NUL_STAND_IN}b" and attempt.reasoning == NUL_STAND_IN
    assert attempt.lean_code == f"theorem x{NUL_STAND_IN} := by\n  simp"
    assert RunEvent.objects.get(run=run).payload["response"] == f"a{NUL_STAND_IN}b"
    assert DeadLetter.objects.count() == 0 and pending(redis_client, run) == 0


def test_a_lone_surrogate_in_a_log_line_is_stored_as_a_replacement_character(run, redis_client):
    add_raw(redis_client, run, {"event": event_json(run, "log", {"message": "x"}).replace('"x"', '"a\\ud800b"')})
    EventIngester().poll_once()
    assert RunEvent.objects.get(run=run).payload["message"] == "a\ufffdb"


def test_garbage_is_dead_lettered_and_acknowledged_and_the_events_behind_it_are_stored(run, redis_client):
    publisher = publisher_for(run)
    publisher.log("before")
    garbage_id = add_raw(redis_client, run, {"event": b"\x00\xff{not json"})
    publisher.log("after")
    EventIngester().poll_once()

    assert [e.payload["message"] for e in RunEvent.objects.filter(run=run).order_by("run_seq")] == ["before", "after"]
    letter = DeadLetter.objects.get()
    assert letter.run == run and letter.entry_id == garbage_id and letter.stream_key == stream_key(str(run.pk))
    assert "not a trainer event" in letter.error
    assert json.loads(letter.raw_payload) == {"event": "\x00\\xff{not json"}  # NUL escaped in the JSON text
    assert pending(redis_client, run) == 0


@pytest.mark.parametrize("fields, error", [
    ({"something": "else"}, "has no 'event' field"),
    ({"event": '{"run_id": "1", "seq": 0, "type": "no_such_type"}'}, "type"),
    ({"event": "[1, 2]"}, "not a trainer event"),
], ids=["no event field", "unknown type", "not an object"])
def test_entries_that_are_no_trainer_event_are_dead_lettered_with_the_reason(run, redis_client, fields, error):
    if "run_id" in fields.get("event", ""):
        fields = {"event": fields["event"].replace('"1"', f'"{run.pk}"')}
    add_raw(redis_client, run, fields)
    EventIngester().poll_once()
    assert error in DeadLetter.objects.get(run=run).error
    assert pending(redis_client, run) == 0


def test_a_payload_that_breaks_its_types_schema_is_dead_lettered_not_half_applied(run, redis_client):
    add_raw(redis_client, run, {"event": event_json(run, "metrics", {"values": {"reward/mean": 1}})})  # no step
    add_raw(redis_client, run, {"event": event_json(run, "rollout_finished", {"step": 1})})  # no rollout_key
    add_raw(redis_client, run, {"event": event_json(run, "run_finished", {"status": "exploded"})})
    EventIngester().poll_once()
    errors = sorted(DeadLetter.objects.values_list("error", flat=True))
    assert len(errors) == 3 and all("breaks its schema" in error for error in errors)
    assert StepMetrics.objects.count() == 0 and ProofAttempt.objects.count() == 0 and RunEvent.objects.count() == 0
    run.refresh_from_db()
    assert run.state == "running"


def test_an_event_naming_another_run_than_its_stream_is_dead_lettered(run, make_run, redis_client):
    other = make_run(state="running")
    add_raw(redis_client, run, {"event": event_json(run, "log", {"message": "x"}, run_id=str(other.pk))})
    EventIngester().poll_once()
    assert f"names run '{other.pk}'" in DeadLetter.objects.get(run=run).error
    assert RunEvent.objects.count() == 0


def test_an_entry_the_database_refuses_is_dead_lettered_and_the_rest_of_its_batch_is_stored(run, redis_client):
    publisher = publisher_for(run)
    publisher.log("one")
    publisher.publish(EventType.METRICS, {"step": 2**40, "values": {}})  # valid JSON, but no integer column holds it
    publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.5}})
    publisher.log("two")
    EventIngester().poll_once()
    stored = RunEvent.objects.filter(run=run).order_by("run_seq")
    assert [(e.run_seq, e.type) for e in stored] == [(1, "log"), (2, "metrics"), (3, "log")]
    assert StepMetrics.objects.get(run=run).step == 1
    assert "the database refused it" in DeadLetter.objects.get(run=run).error
    assert pending(redis_client, run) == 0


def test_an_entry_read_again_after_a_crash_is_dead_lettered_once(run, redis_client):
    add_raw(redis_client, run, {"event": "garbage"})
    ingester = EventIngester()
    ingester._streams_to_read()
    entries = redis_client.xreadgroup(GROUP, ingester.consumer, {stream_key(str(run.pk)): ">"})[0][1]
    ingester.dead_letter(stream_key(str(run.pk)), run.pk, [(entries[0][0].decode(), entries[0][1], "first try")])
    ingester.poll_once()  # as after a crash between the dead letter and the acknowledgement
    assert DeadLetter.objects.count() == 1


def test_the_run_page_counts_the_dead_letters(run, redis_client, client, alice):
    add_raw(redis_client, run, {"event": "garbage"})
    add_raw(redis_client, run, {"event": "more garbage"})
    EventIngester().poll_once()
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert '<strong id="dead-letter-count">2</strong> of this run\'s events could not be stored' in page
    assert client.get(f"/api/runs/{run.pk}/events").json()["dead_letters"] == 2
