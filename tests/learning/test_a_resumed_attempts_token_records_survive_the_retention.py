"""``schedule.keep_token_records`` keeps the latest steps counted from where the current attempt has come: a resumed
attempt replays the steps an earlier attempt wrote past its last checkpoint, and its fresh files of those steps are
kept, never pruned as older than the earlier attempt's (trainer/observability/token_records.py ``prune_records``).

Attempt 1 trains four steps with a checkpoint after each, keeping two steps' files; its folder is then cut back to
step 1's checkpoint, as a run killed after step 4's records but before any later checkpoint survived would be, and
attempt 2 resumes from it and is cancelled after its step 2."""

from __future__ import annotations

import copy
import shutil

from tests.asynchronous.synchronous_loop import PROBLEMS, synchronous_config
from tests.learning.conftest import FirstTokenRewardScorer
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability import token_records
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.run.checkpoint import first_event_seq_for_resume
from trainer.run.lifecycle import RunCancelled


class RunCancelledAfterItsRecords(TrainingRun):
    """Cancelled at ``cancel_at_step``, after that step's records were handed to the writer, as a SIGTERM does."""

    def __init__(self, *args, cancel_at_step: int | None = None, **options):
        super().__init__(*args, **options)
        self.cancel_at_step = cancel_at_step

    def add_retries(self, rollouts, step):
        if step == self.cancel_at_step:
            raise RunCancelled("SIGTERM")
        return super().add_retries(rollouts, step)


def run_attempt(tokenizer, output, attempt: int, *, cancel_at_step=None) -> RunStatus:
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    config = synchronous_config(schedule={"total_steps": 4, "checkpoint_every": 1, "keep_token_records": 2})
    resume = attempt > 1
    publisher = EventPublisher("records", sink, first_event_seq_for_resume(output) if resume else 0, attempt=attempt)
    status = RunCancelledAfterItsRecords(config, PROBLEMS, output, publisher, cancel_at_step=cancel_at_step,
                                         scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model,
                                         tokenizer=tokenizer, resume=resume).run()
    assert not sink.of_type(EventType.ERROR), sink.of_type(EventType.ERROR)
    return status


def files(output) -> list[tuple[int, int]]:
    return [(step, attempt) for step, attempt, _ in token_records.recorded_steps(output)]


def test_the_resumed_attempts_replayed_step_keeps_its_file(smollm2_tokenizer_once, tmp_path):
    assert run_attempt(smollm2_tokenizer_once, tmp_path, 1) is RunStatus.SUCCEEDED
    assert files(tmp_path) == [(3, 1), (4, 1)]
    for later in ("step_000002", "step_000003", "step_000004"):
        shutil.rmtree(tmp_path / "checkpoints" / later)

    assert run_attempt(smollm2_tokenizer_once, tmp_path, 2, cancel_at_step=2) is RunStatus.CANCELLED
    assert (2, 2) in files(tmp_path)
    assert token_records.read_step_summary(tmp_path, 2, 2)
    # Attempt 1's steps past where attempt 2 has come stay until it passes them: the only records of those rollouts.
    assert files(tmp_path) == [(2, 2), (3, 1), (4, 1)]


def test_the_window_moves_with_the_resumed_attempt(smollm2_tokenizer_once, tmp_path):
    assert run_attempt(smollm2_tokenizer_once, tmp_path, 1) is RunStatus.SUCCEEDED
    for later in ("step_000002", "step_000003", "step_000004"):
        shutil.rmtree(tmp_path / "checkpoints" / later)

    assert run_attempt(smollm2_tokenizer_once, tmp_path, 2) is RunStatus.SUCCEEDED
    assert files(tmp_path) == [(3, 1), (3, 2), (4, 1), (4, 2)]  # every attempt's file of a kept step stays
