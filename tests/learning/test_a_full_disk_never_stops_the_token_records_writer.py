"""A full disk fails a step's token records, never the run: when the write fails and the ``.failed`` marker that
would keep its reason cannot be written either, the writer reports both and goes on with the next step, so neither
the next ``submit`` nor the ``wait`` before a checkpoint hangs.

The disk is full for real where it matters: the step's half file and its marker are links to /dev/full, whose every
write the kernel answers with ENOSPC, so the real ``write_step_records`` and the real marker write fail as they
would on a full disk, while the other steps' files are written beside them."""

from __future__ import annotations

import threading

from trainer.observability import token_records

HANG_TIMEOUT_S = 60  # only so that a hanging writer ends the test: no assertion reads a time


def fill_the_disk_for(output_dir, step: int) -> None:
    """Step ``step``'s half file and its failed marker write into /dev/full."""
    folder = output_dir / token_records.FOLDER
    folder.mkdir(exist_ok=True)
    path = token_records.records_path(output_dir, step, 1)
    path.with_name(path.name + ".partial").symlink_to("/dev/full")
    token_records.marker_path(output_dir, step, 1, token_records.FAILED).symlink_to("/dev/full")


def run_four_steps_in_a_thread(writer) -> threading.Thread:
    """What the run does with its writer: hand over each step, wait before a checkpoint, close at the end."""
    def run():
        for step in (1, 2, 3, 4):
            writer.submit(step, [])
        writer.wait()
        writer.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_step_whose_failure_cannot_be_marked_is_reported_and_the_next_steps_are_written(tmp_path):
    writer = token_records.RecordsWriter(tmp_path, 1, None, token_texts=lambda ids: [])
    fill_the_disk_for(tmp_path, 2)  # after the writer's start, which clears what a killed run left half-written
    run = run_four_steps_in_a_thread(writer)
    run.join(HANG_TIMEOUT_S)
    assert not run.is_alive(), "the run hangs on its token-records writer"
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [1, 3, 4]
    failures = writer.take_failures()
    assert len(failures) == 2
    assert "step 2's token records were not written" in failures[0] and "No space left on device" in failures[0]
    assert "step 2's '.failed' marker could not be written either" in failures[1]
    assert "No space left on device" in failures[1]


def test_the_step_is_left_neither_pending_nor_with_a_half_written_reason(tmp_path):
    writer = token_records.RecordsWriter(tmp_path, 1, None, token_texts=lambda ids: [])
    fill_the_disk_for(tmp_path, 2)  # after the writer's start, which clears what a killed run left half-written
    run = run_four_steps_in_a_thread(writer)
    run.join(HANG_TIMEOUT_S)
    assert not run.is_alive(), "the run hangs on its token-records writer"
    left = sorted(path.name for path in (tmp_path / token_records.FOLDER).iterdir())
    assert left == [token_records.records_path(tmp_path, step, 1).name for step in (1, 3, 4)]
    looked_up = token_records.look_up_rollout(tmp_path, 2, 1, "a1-s2-p0-r0", is_being_trained=True)
    assert looked_up.state is token_records.RecordsState.NOT_RECORDED
