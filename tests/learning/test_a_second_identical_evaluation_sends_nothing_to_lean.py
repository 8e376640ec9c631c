"""Two evaluation runs of the same model with the same seed, sharing verdicts through Redis
(trainer/verification/shared_cache.py): the second sends nothing to Lean and reports the same pass@k.

The answers come from a canned-answers engine (a test double: a tiny random model never writes the
recipe's shape); the scorer, the Lean client, the stand-in server, the shared cache in a real Redis,
the evaluation-only driver and its events are real.
"""

from __future__ import annotations

import copy
import os

import pytest
import redis

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.loop.evaluation_run import EvaluationRun
from trainer.observability.events import EventPublisher, EventType, ListSink, RunStatus
from trainer.verification.shared_cache import PREFIX, URL_VARIABLE
from trainer.verification.standin_server import StandinServerThread


@pytest.fixture
def shared_verdicts(monkeypatch):
    url = os.environ["REDIS_URL"]
    connection = redis.Redis.from_url(url)
    for key in connection.scan_iter(PREFIX + "*"):
        connection.delete(key)
    monkeypatch.setenv(URL_VARIABLE, url)
    yield
    for key in connection.scan_iter(PREFIX + "*"):
        connection.delete(key)


def evaluate_once(server, tokenizer, output):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    config = tiny_run_config(rollout={"max_response_tokens": 64}, schedule={"eval_samples": 3, "seed": 7},
                             verifier={"url": server.url})
    status = EvaluationRun(config, PROBLEMS, output, EventPublisher("eval", sink), model=model, tokenizer=tokenizer,
                           engine=CannedAnswersEngine(tokenizer, answer_for), eval_problems=PROBLEMS,
                           install_signal_handlers=False).run()
    assert status is RunStatus.SUCCEEDED
    (evaluation,) = [event.payload["values"] for event in sink.events if event.type == EventType.EVALUATION]
    return evaluation, sink


def test_the_second_evaluation_asks_lean_nothing_and_reports_the_same_pass_at_k(
        shared_verdicts, smollm2_tokenizer_once, tmp_path):
    with StandinServerThread() as server:
        first, first_events = evaluate_once(server, smollm2_tokenizer_once, tmp_path / "first")
        lean_requests = server.app.requests_received
        assert lean_requests > 0 and first["verifier/shared_cache_hit_rate"] == 0.0
        second, _ = evaluate_once(server, smollm2_tokenizer_once, tmp_path / "second")
        assert server.app.requests_received == lean_requests
    # Every verdict from a cache: other runs' (shared) or, for a code checked twice within the run, its own.
    assert second["verifier/cache_hit_rate"] == 1.0 and second["verifier/shared_cache_hit_rate"] > 0
    curve = {name: value for name, value in first.items() if "curve/" in name}
    assert curve and curve == {name: value for name, value in second.items() if "curve/" in name}
    rollouts = [event for event in first_events.events if event.type == EventType.ROLLOUT_FINISHED]
    assert len([r for r in rollouts if r.payload["turn"] == "first"]) == len(PROBLEMS) * 3  # every sample kept
