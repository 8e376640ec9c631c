"""A step's token records are written by a thread of their own while the run goes on: the step returns before its
file is written, and the run waits for the writer before a checkpoint, at its end and when cancelled, so no file is
left half-written. A write that fails is published as an error (training goes on) and leaves the files written
before it whole. The writer here is the real one, held at a gate the test opens: nothing is timed."""

from __future__ import annotations

import copy
import hashlib
import threading

import pytest

from tests.asynchronous.synchronous_loop import PROBLEMS, synchronous_config
from tests.learning.conftest import FirstTokenRewardScorer
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability import token_records
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.run.lifecycle import RunCancelled

GATE_TIMEOUT_S = 600  # only so that a broken test ends: no assertion reads a time


class GatedWrite:
    """``write_step_records`` that, for the steps in ``gated``, waits until the test opens the gate."""

    def __init__(self, gated=(), fails_at=()):
        self.gated, self.fails_at = set(gated), set(fails_at)
        self.started = {step: threading.Event() for step in self.gated}
        self.gate = threading.Event()
        self.step_one_digest_before_the_failure = None

    def __call__(self, output_dir, step, attempt, records, token_texts):
        if step in self.gated:
            self.started[step].set()
            assert self.gate.wait(GATE_TIMEOUT_S), "the test never opened the gate"
        if step in self.fails_at:
            self.step_one_digest_before_the_failure = digest(token_records.records_path(output_dir, 1, attempt))
            raise OSError(28, "No space left on device")
        return token_records.write_step_records(output_dir, step, attempt, records, token_texts)


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class RunWithGatedRecords(TrainingRun):
    def __init__(self, *args, write: GatedWrite, cancel_at_step: int | None = None, **options):
        super().__init__(*args, **options)
        self.write, self.cancel_at_step = write, cancel_at_step

    def start_token_records_writer(self):
        return token_records.RecordsWriter(self.output_dir, self.attempt, self.config.schedule.keep_token_records,
                                           token_records.TokenTexts(self.tokenizer), write=self.write)

    def add_retries(self, rollouts, step):
        if step == self.cancel_at_step:
            raise RunCancelled("SIGTERM")  # as the signal handler raises it, after the step's records were handed over
        return super().add_retries(rollouts, step)


def make_run(tokenizer, output, write: GatedWrite, *, checkpoint_every: int = 0, cancel_at_step=None):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    config = synchronous_config(schedule={"checkpoint_every": checkpoint_every})
    run = RunWithGatedRecords(config, PROBLEMS, output, EventPublisher("records", sink), write=write,
                              cancel_at_step=cancel_at_step, scorer=FirstTokenRewardScorer(tokenizer.decode([198])),
                              model=model, tokenizer=tokenizer)
    return run, sink


def run_in_a_thread(run) -> tuple[threading.Thread, dict]:
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.setdefault("status", run.run()), daemon=True)
    thread.start()
    return thread, outcome


def markers(output) -> list[str]:
    folder = output / token_records.FOLDER
    return sorted(path.name for path in folder.iterdir() if not path.name.endswith(".parquet"))


def test_a_step_returns_while_its_records_are_still_being_written(smollm2_tokenizer_once, tmp_path):
    write = GatedWrite(gated={1})
    run, _ = make_run(smollm2_tokenizer_once, tmp_path, write)
    run.set_up()
    try:
        run.train_step(1)  # returns with the write held at the gate
        assert write.started[1].wait(GATE_TIMEOUT_S)  # the writer has it, held at the gate
        assert not token_records.records_path(tmp_path, 1, 1).exists()
        assert markers(tmp_path) == ["step-000001-attempt-1.parquet.pending"]
        write.gate.set()
        run.wait_for_token_records()
        assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1]
        assert markers(tmp_path) == []
    finally:
        write.gate.set()
        run.tear_down()


def test_the_runs_end_waits_for_its_last_steps_records(smollm2_tokenizer_once, tmp_path):
    write = GatedWrite(gated={3})
    run, sink = make_run(smollm2_tokenizer_once, tmp_path, write)
    thread, outcome = run_in_a_thread(run)
    assert write.started[3].wait(GATE_TIMEOUT_S)
    assert thread.is_alive() and not sink.of_type(EventType.RUN_FINISHED)  # held until the file is written
    assert not sink.of_type(EventType.CHECKPOINT_SAVED)  # the end's checkpoint waits for the records too
    write.gate.set()
    thread.join(GATE_TIMEOUT_S)
    assert outcome["status"] is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1, 2, 3]
    assert markers(tmp_path) == []


def test_a_checkpoint_waits_for_the_records_of_the_steps_before_it(smollm2_tokenizer_once, tmp_path):
    write = GatedWrite(gated={2})
    run, sink = make_run(smollm2_tokenizer_once, tmp_path, write, checkpoint_every=2)
    thread, outcome = run_in_a_thread(run)
    assert write.started[2].wait(GATE_TIMEOUT_S)
    assert not sink.of_type(EventType.CHECKPOINT_SAVED)
    write.gate.set()
    thread.join(GATE_TIMEOUT_S)
    assert outcome["status"] is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    assert [e.payload["step"] for e in sink.of_type(EventType.CHECKPOINT_SAVED)] == [2, 3]


def test_a_cancelled_run_finishes_the_file_it_was_writing_and_leaves_no_half_file(smollm2_tokenizer_once, tmp_path):
    write = GatedWrite(gated={2})
    run, sink = make_run(smollm2_tokenizer_once, tmp_path, write, cancel_at_step=2)
    thread, outcome = run_in_a_thread(run)
    assert write.started[2].wait(GATE_TIMEOUT_S)
    assert thread.is_alive() and not sink.of_type(EventType.RUN_FINISHED)
    write.gate.set()
    thread.join(GATE_TIMEOUT_S)
    assert outcome["status"] is RunStatus.CANCELLED
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1, 2]
    assert token_records.read_step_summary(tmp_path, 2, 1)  # whole: it opens and has its rows
    assert markers(tmp_path) == []


def test_a_failed_write_is_published_and_leaves_the_files_before_it_whole(smollm2_tokenizer_once, tmp_path):
    write = GatedWrite(fails_at={2})
    run, sink = make_run(smollm2_tokenizer_once, tmp_path, write)
    assert run.run() is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    errors = [e.payload["message"] for e in sink.of_type(EventType.LOG) if e.payload["level"] == "error"]
    assert len(errors) == 1 and "step 2's token records were not written" in errors[0]
    assert "No space left on device" in errors[0]
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1, 3]  # training went on
    assert digest(token_records.records_path(tmp_path, 1, 1)) == write.step_one_digest_before_the_failure
    assert markers(tmp_path) == ["step-000002-attempt-1.parquet.failed"]
    looked_up = token_records.look_up_rollout(tmp_path, 2, 1, "any", is_being_trained=False)
    assert looked_up.state is token_records.RecordsState.NOT_RECORDED
    assert "No space left on device" in looked_up.reason


def test_a_run_killed_mid_write_leaves_a_failed_marker_for_the_next_attempt_to_find(tmp_path):
    folder = tmp_path / token_records.FOLDER
    folder.mkdir()
    (folder / "step-000004-attempt-1.parquet.partial").write_bytes(b"PAR1 half")
    token_records.marker_path(tmp_path, 4, 1, token_records.PENDING).touch()
    writer = token_records.RecordsWriter(tmp_path, 2, None, token_texts=None)
    writer.close()
    assert markers(tmp_path) == ["step-000004-attempt-1.parquet.failed"]
    looked_up = token_records.look_up_rollout(tmp_path, 4, 1, "a1-s4-p0-r0", is_being_trained=False)
    assert looked_up.state is token_records.RecordsState.NOT_RECORDED and "killed" in looked_up.reason


def test_the_writer_holds_at_most_one_waiting_step_besides_the_one_it_writes(tmp_path):
    write = GatedWrite(gated={1, 2, 3})
    writer = token_records.RecordsWriter(tmp_path, 1, None, lambda ids: [str(i) for i in ids], write=write)
    writer.submit(1, [])
    assert write.started[1].wait(GATE_TIMEOUT_S)  # being written
    writer.submit(2, [])  # waits in the queue, which is now full: a third submit waits for room
    assert writer._queue.full()
    third = threading.Thread(target=writer.submit, args=(3, []), daemon=True)
    third.start()
    write.gate.set()
    third.join(GATE_TIMEOUT_S)
    writer.close()
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1, 2, 3]


@pytest.mark.parametrize("waiting_steps", [0, -1])
def test_a_writer_with_no_room_for_a_waiting_step_is_refused(tmp_path, waiting_steps):
    with pytest.raises(ValueError, match="waiting_steps"):
        token_records.RecordsWriter(tmp_path, 1, None, None, waiting_steps=waiting_steps)
