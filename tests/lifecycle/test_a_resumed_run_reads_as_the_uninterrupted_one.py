"""A run resumed by a later attempt: its events continue the numbering after everything the run it
continues published, its log comes after RUN_STARTED, its rollout keys name its attempt, and the
verdict cache's hit rate reads as if it had never been interrupted (the real scorer, the stand-in)."""

from __future__ import annotations

import copy
import shutil

import pytest

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.run.checkpoint import LAST_EVENT_SEQ_FILE, first_event_seq_for_resume
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.verification.standin_server import StandinServerThread


def train(output, server, tokenizer_source, *, attempt, resume):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer_source))
    config = tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 3, "max_response_tokens": 64},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
        schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 1},
        verifier={"url": server.url},
    )
    sink = ListSink()
    first_seq = first_event_seq_for_resume(output) if resume else 0
    status = TrainingRun(config, PROBLEMS, output, EventPublisher("resume", sink, first_seq=first_seq, attempt=attempt),
                         model=model, tokenizer=tokenizer, engine=CannedAnswersEngine(tokenizer, answer_for),
                         resume=resume).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return sink


@pytest.fixture(scope="module")
def straight_and_resumed(tmp_path_factory, smollm2_tokenizer_once):
    straight = tmp_path_factory.mktemp("straight")
    resumed = tmp_path_factory.mktemp("resumed")
    with StandinServerThread() as server:
        sink_a = train(straight, server, smollm2_tokenizer_once, attempt=1, resume=False)
        # Attempt 1 as it was when cancelled in step 3: step 2's checkpoint, and every event it
        # published, step 3 and its RUN_FINISHED included, on record.
        shutil.copytree(straight / "checkpoints" / "step_000002", resumed / "checkpoints" / "step_000002")
        shutil.copy(straight / LAST_EVENT_SEQ_FILE, resumed / LAST_EVENT_SEQ_FILE)
        sink_b = train(resumed, server, smollm2_tokenizer_once, attempt=2, resume=True)
    return sink_a, sink_b


def test_the_resumed_attempt_numbers_its_first_event_after_the_last_one_of_the_attempt_it_continues(straight_and_resumed):
    sink_a, sink_b = straight_and_resumed
    assert sink_b.events[0].seq == sink_a.events[-1].seq + 1
    assert [e.seq for e in sink_b.events] == list(range(sink_b.events[0].seq, sink_b.events[0].seq + len(sink_b.events)))


def test_its_log_of_where_it_resumed_comes_after_run_started(straight_and_resumed):
    _, sink_b = straight_and_resumed
    assert [e.type for e in sink_b.events[:2]] == [EventType.RUN_STARTED, EventType.LOG]
    assert "resumed from" in sink_b.events[1].payload["message"]
    assert sink_b.events[0].payload["resumed_from_step"] == 2


def test_every_event_carries_its_attempt_and_rollout_keys_name_it(straight_and_resumed):
    sink_a, sink_b = straight_and_resumed
    assert {e.attempt for e in sink_a.events} == {1} and {e.attempt for e in sink_b.events} == {2}
    keys_a = [e.payload["rollout_key"] for e in sink_a.of_type(EventType.ROLLOUT_FINISHED) if e.payload["step"] == 3]
    keys_b = [e.payload["rollout_key"] for e in sink_b.of_type(EventType.ROLLOUT_FINISHED)]
    assert keys_a and all(key.startswith("a1-s3-") for key in keys_a)
    assert sorted(keys_b) == sorted(key.replace("a1-", "a2-", 1) for key in keys_a)


def test_the_verdict_cache_hit_rate_after_an_exact_resume_is_the_uninterrupted_runs(straight_and_resumed):
    sink_a, sink_b = straight_and_resumed
    step3_a = [e.payload["values"] for e in sink_a.of_type(EventType.METRICS) if e.payload["step"] == 3][0]
    (step3_b,) = [e.payload["values"] for e in sink_b.of_type(EventType.METRICS)]
    assert 0 < step3_a["verifier/cache_hit_rate"] < 1  # some hits, some misses: the figure can tell them apart
    assert step3_b["verifier/cache_hit_rate"] == step3_a["verifier/cache_hit_rate"]
    assert step3_b["reward/mean"] == step3_a["reward/mean"]
