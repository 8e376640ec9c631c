"""A checkpoint of an asynchronous run records the batches in flight (sampled, not trained). A resumed run generates
those same prompts again from the checkpoint's weights, says so, and trains every step once."""

from __future__ import annotations

import copy
import shutil

import pytest

from tests.asynchronous.synchronous_loop import PROBLEMS, synchronous_config
from tests.learning.conftest import FirstTokenRewardScorer
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.run.checkpoint import first_event_seq_for_resume


def train(tokenizer, output, *, resume: bool):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0 if not resume else 99, tokenizer=copy.deepcopy(tokenizer))
    config = synchronous_config({"checkpoint_every": 1}, max_staleness=1)
    sink = ListSink()
    publisher = EventPublisher("resume", sink, first_seq=first_event_seq_for_resume(output) if resume else 0,
                               attempt=2 if resume else 1)
    status = TrainingRun(config, PROBLEMS, output, publisher, scorer=FirstTokenRewardScorer(tokenizer.decode([198])),
                         model=model, tokenizer=tokenizer, resume=resume).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return sink


@pytest.fixture(scope="module")
def uninterrupted_and_resumed(smollm2_tokenizer_once, tmp_path_factory):
    straight = tmp_path_factory.mktemp("straight")
    uninterrupted = train(smollm2_tokenizer_once, straight, resume=False)
    interrupted = tmp_path_factory.mktemp("interrupted")
    shutil.copytree(straight / "checkpoints" / "step_000001", interrupted / "checkpoints" / "step_000001")
    return uninterrupted, train(smollm2_tokenizer_once, interrupted, resume=True)


def problems_by_step(sink) -> dict[int, list[str]]:
    by_step: dict[int, list[str]] = {}
    for event in sink.of_type(EventType.ROLLOUT_FINISHED):
        by_step.setdefault(event.payload["step"], []).append(event.payload["problem_id"])
    return {step: sorted(problems) for step, problems in by_step.items()}


def test_the_resumed_run_trains_each_remaining_step_once(uninterrupted_and_resumed):
    _, resumed = uninterrupted_and_resumed
    assert [e.payload["step"] for e in resumed.of_type(EventType.STEP_STARTED)] == [2, 3]
    assert [e.payload["step"] for e in resumed.of_type(EventType.METRICS)] == [2, 3]


def test_the_batches_in_flight_at_the_checkpoint_are_generated_again_with_the_same_prompts(uninterrupted_and_resumed):
    uninterrupted, resumed = uninterrupted_and_resumed
    before, after = problems_by_step(uninterrupted), problems_by_step(resumed)
    assert after == {step: before[step] for step in (2, 3)}
    # From the checkpoint's weights (version 1): nothing older than the resumed learner is trained.
    versions = {(e.payload["step"], e.payload["policy_version"]) for e in resumed.of_type(EventType.ROLLOUT_FINISHED)}
    assert versions == {(2, 1), (3, 1)}


def test_the_resumed_run_says_which_batches_it_generates_again(uninterrupted_and_resumed):
    _, resumed = uninterrupted_and_resumed
    messages = [e.payload["message"] for e in resumed.of_type(EventType.LOG)]
    assert any("2 batch(es) were in flight at the checkpoint (steps 2–3), sampled but never trained: their prompts "
               "are generated again from step 1's weights" in message for message in messages), messages
