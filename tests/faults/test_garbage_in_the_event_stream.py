"""Garbage and NUL bytes in a run's event stream: each bad entry is set aside (the dead-letter table of
the event path) and the run ends succeeded with every good event stored once."""

import json

import pytest
import redis
from django.conf import settings

from proofs.models import ProofAttempt
from runs.models import Run
from tests.faults.conftest import assert_same_proof_attempts, wait_for_end, wait_until
from trainer.observability.events import EventType, TrainerEvent, stream_key

pytestmark = [pytest.mark.integration, pytest.mark.faults, pytest.mark.django_db(transaction=True)]


def test_a_run_survives_garbage_and_nul_bytes_in_its_stream(launch, undisturbed, supervised_platform, platform_logs):
    run = launch()
    wait_until(lambda: ProofAttempt.objects.filter(run_id=run.pk).exists(), "the first stored rollout", platform_logs,
               every_s=0.05)
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = stream_key(str(run.pk))
    attempt = Run.objects.get(pk=run.pk).attempt
    nul_log = TrainerEvent(run_id=str(run.pk), attempt=attempt, seq=10**9, type=EventType.LOG,
                           payload={"level": "info", "message": "model output with a NUL \u0000 in it"})
    for fields in (
        {"event": b"\x00\xff\xfe not json at all"},
        {"nothing": "an entry without an event field"},
        {"event": json.dumps({"run_id": str(run.pk), "seq": "not a number", "type": "log"})},
        {"event": nul_log.model_dump_json()},  # valid JSON whose text PostgreSQL's jsonb refuses
    ):
        client.xadd(key, fields)
    assert_same_proof_attempts(wait_for_end(run, platform_logs), undisturbed, platform_logs)
