"""Per-token records of every trained rollout: what the learner saw and did, token by token, one file a step.

For each response token: the engine's log-probability (what it sampled with), the learner's π_old
log-probability (the ratio's denominator, ``Learner.old_logprobs``), the entropy of the learner's
distribution there (computed inside the chunked log-prob pass, trainer/learning/token_logprobs.py), the token's loss
weight (0 where masked, the truncated importance weight of an asynchronous run, else 1) and flags saying which
clip bound or cap changed it; and the rollout's advantage. The proof viewer draws the answer from them
(``ProofAttempt.look_up_token_records`` in platform/proofs/models.py reads them for platform/proofs/api.py) and the
step's exports carry them (platform/proofs/export.py).

Columnar, beside the run's artifacts (``<output>/token_records/step-000002-attempt-1.parquet``), never in
PostgreSQL rows: a step of the h100x8 preset is up to 2,048 × 24,576 tokens (benchmarks/token_records.py gives
its bytes and write time). One row per rollout, the per-token figures as list columns, rows sorted by rollout
key in small row groups, so opening one rollout reads one row group of one file. Log-probabilities stay float32
(the mismatch is their difference, which float16 would round away); entropy and loss weight are float16.
A resumed run replays steps under new keys, so each attempt keeps its own file. ``schedule.keep_token_records``
is the retention: the latest that many steps' files are kept, counted back from the current attempt's newest step
(``prune_records``; None keeps every step's, as checkpoints).

Written off the step's critical path (``RecordsWriter``): one thread writes one step's file at a time while the run
trains the next step; a run waits for it before a checkpoint, at its end and when cancelled. A step handed to the
writer has a ``.pending`` marker beside where its file will be until the file is renamed into place, or a
``.failed`` marker saying why it never will be; ``look_up_rollout`` reads them, so a reader tells "not written yet"
from "not recorded" (tests/learning/test_token_records_are_written_off_the_steps_path.py).

A data-parallel run sends each rank's records to rank 0 as flat arrays, not pickled objects
(trainer/observability/packed_token_records.py; trainer/loop/distributed.py gathers them).

Why one piece: the file's name and layout, the writer's markers and rename, the retention and the readers are one
protocol (what each reader may find at any moment, and what it means): a change to one side is a change to all.
"""

from __future__ import annotations

import enum
import math
import os
import queue
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainer.observability.gap import RATIO_BOUNDS

FOLDER = "token_records"
ROWS_PER_GROUP = 32  # rollouts per Parquet row group: opening one rollout decodes at most this many

# Bits of the ``flags`` column: why a token's loss is not the plain clipped-ratio one.
IS_CONTEXT = 1  # not sampled by the policy (Lean's reply inside the reasoning): weight 0, no loss
IS_CLIPPED_LOW = 2  # advantage < 0 and ratio < 1 − clip_ratio_low: the clip silenced it
IS_CLIPPED_HIGH = 4  # advantage > 0 and ratio > 1 + clip_ratio_high
IS_DUAL_CLIPPED = 8  # advantage < 0 and ratio > dual_clip
IS_CAPPED = 16  # the behaviour importance weight reached loss.behaviour_is_cap (asynchronous runs)
FLAG_NAMES = {IS_CONTEXT: "context", IS_CLIPPED_LOW: "clip_low", IS_CLIPPED_HIGH: "clip_high",
              IS_DUAL_CLIPPED: "dual_clip", IS_CAPPED: "capped"}

_FILE_NAME = re.compile(r"^step-(\d+)-attempt-(\d+)\.parquet$")
PENDING = ".pending"  # beside a step's file-to-be: handed to the writer, not yet renamed into place
FAILED = ".failed"  # beside a step's file-never-to-be: holds the reason in words
_MARKER_NAME = re.compile(r"^step-(\d+)-attempt-(\d+)\.parquet\.(pending|failed)$")


@dataclass
class TokenRecord:
    """One trained rollout's figures, each a sequence of one value per response token (numpy arrays or lists)."""

    rollout_key: str
    advantage: float
    token_ids: Sequence[int]
    engine_logprobs: Sequence[float] | None  # None when the engine gave none; NaN at context tokens
    learner_logprobs: Sequence[float]  # π_old
    entropies: Sequence[float]
    loss_weights: Sequence[float]
    flags: Sequence[int]

    def ratio_outside_tokens(self) -> int | None:
        """Sampled tokens whose engine/π_old ratio falls outside RATIO_BOUNDS (the mismatch chart's figure); None
        when the engine gave no log-probabilities: not measured, which a 0 would claim was measured and fine."""
        import numpy as np

        if self.engine_logprobs is None:
            return None
        low, high = (math.log(bound) for bound in RATIO_BOUNDS)
        engine = np.asarray(self.engine_logprobs, dtype=np.float64)  # None (not sampled) becomes NaN
        difference = np.asarray(self.learner_logprobs, dtype=np.float64) - engine
        is_sampled = ~np.isnan(engine) & (np.asarray(self.flags, dtype=np.uint8) & IS_CONTEXT == 0)
        return int((((difference < low) | (difference > high)) & is_sampled).sum())


def records_path(output_dir: str | os.PathLike, step: int, attempt: int) -> Path:
    return Path(output_dir) / FOLDER / f"step-{step:06d}-attempt-{attempt}.parquet"


def marker_path(output_dir: str | os.PathLike, step: int, attempt: int, marker: str) -> Path:
    """``PENDING`` or ``FAILED``'s marker of one step's file."""
    path = records_path(output_dir, step, attempt)
    return path.with_name(path.name + marker)


def schema():
    import pyarrow as pa

    return pa.schema([
        ("rollout_key", pa.string()), ("step", pa.int32()), ("advantage", pa.float32()),
        ("ratio_outside_tokens", pa.int32()), ("token_ids", pa.list_(pa.int32())),
        ("token_texts", pa.list_(pa.string())), ("engine_logprob", pa.list_(pa.float32())),
        ("learner_logprob", pa.list_(pa.float32())), ("entropy", pa.list_(pa.float16())),
        ("loss_weight", pa.list_(pa.float16())), ("flags", pa.list_(pa.uint8())),
    ])


REPLACEMENT_CHARACTER = "\ufffd"
MAX_TOKENS_PER_CHARACTER = 8  # a character is at most 4 UTF-8 bytes; a few more for tokens that end one and start the next


class TokenTexts:
    """Each token's text, in whole characters: ``"".join(texts)`` is the answer as decoded, never a replacement
    character where the answer has none. Byte-level vocabularies split a character's UTF-8 bytes over tokens
    (``ℚ`` is three bytes, often two tokens), and such a token decodes alone to U+FFFD; those tokens are decoded
    together, the last of them carries the whole text and the ones before it the empty string (the proof viewer
    draws such a run of tokens as one, frontend/src/_tokens.js). Each id alone is decoded once (a step repeats
    ids millions of times); only the split characters are decoded again, a few tokens at a time."""

    def __init__(self, tokenizer):
        import numpy as np

        self.tokenizer = tokenizer
        self._texts = np.empty(0, dtype=object)  # by token id; None where not decoded yet

    def __call__(self, token_ids: Sequence[int]):
        """The texts of ``token_ids`` (one answer's, in order), as a numpy array of str."""
        import numpy as np

        ids = np.asarray(token_ids, dtype=np.int64)
        texts = self._alone(ids).copy()
        start = 0
        while start < len(texts):
            if REPLACEMENT_CHARACTER not in texts[start]:
                start += 1
                continue
            end = self._whole_characters_end(ids, start)
            if end is None:  # bytes that are no UTF-8 at all: as decoded, U+FFFD and all
                start += 1
                continue
            texts[end] = self.tokenizer.decode([int(token) for token in ids[start:end + 1]])
            texts[start:end] = ""
            start = end + 1
        return texts

    def _whole_characters_end(self, ids, start: int) -> int | None:
        """The first token from ``start`` on at which the tokens' bytes end in whole characters; the answer's last
        token where a character was cut off by the end of the answer (the length limit: drawn once, as decoded)."""
        last = min(len(ids), start + MAX_TOKENS_PER_CHARACTER) - 1
        for end in range(start, last + 1):
            if REPLACEMENT_CHARACTER not in self.tokenizer.decode([int(token) for token in ids[start:end + 1]]):
                return end
        return last if last == len(ids) - 1 else None

    def _alone(self, ids):
        import numpy as np

        if ids.size and ids.max() >= len(self._texts):
            grown = np.empty(int(ids.max()) + 1, dtype=object)
            grown[: len(self._texts)] = self._texts
            self._texts = grown
        for token in np.unique(ids[np.equal(self._texts[ids], None)]):
            self._texts[token] = self.tokenizer.decode([int(token)])
        return self._texts[ids]


def write_step_records(output_dir: str | os.PathLike, step: int, attempt: int, records: Sequence[TokenRecord],
                       token_texts) -> Path:
    """Write one step's records (sorted by rollout key) atomically; returns the file's path."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    ordered = sorted(records, key=lambda record: record.rollout_key)
    offsets = pa.array(np.concatenate([[0], np.cumsum([len(r.token_ids) for r in ordered], dtype=np.int64)])
                       .astype(np.int32))

    def per_token(values_of, dtype, value_type):
        flat = np.concatenate([np.asarray(values_of(r), dtype=dtype) for r in ordered]) if ordered else np.array([], dtype)
        return pa.ListArray.from_arrays(offsets, pa.array(flat, type=value_type))

    def engine_values(record: TokenRecord):
        if record.engine_logprobs is None:
            return np.full(len(record.token_ids), np.nan, dtype=np.float32)
        values = np.asarray(record.engine_logprobs, dtype=np.float32).copy()
        values[np.asarray(record.flags, dtype=np.uint8) & IS_CONTEXT > 0] = np.nan
        return values

    engine = np.concatenate([engine_values(r) for r in ordered]) if ordered else np.array([], np.float32)
    table = pa.table({
        "rollout_key": pa.array([r.rollout_key for r in ordered], pa.string()),
        "step": pa.array([step] * len(ordered), pa.int32()),
        "advantage": pa.array([r.advantage for r in ordered], pa.float32()),
        "ratio_outside_tokens": pa.array([r.ratio_outside_tokens() for r in ordered], pa.int32()),
        "token_ids": per_token(lambda r: r.token_ids, np.int32, pa.int32()),
        "token_texts": pa.ListArray.from_arrays(offsets, pa.array(
            np.concatenate([np.asarray(token_texts(r.token_ids), dtype=object) for r in ordered])
            if ordered else [], pa.string())),
        # Null where the engine gave no figure, or at a context token (it sampled none there).
        "engine_logprob": pa.ListArray.from_arrays(offsets, pa.array(engine, type=pa.float32(), from_pandas=True)),
        "learner_logprob": per_token(lambda r: r.learner_logprobs, np.float32, pa.float32()),
        "entropy": per_token(lambda r: r.entropies, np.float16, pa.float16()),
        "loss_weight": per_token(lambda r: r.loss_weights, np.float16, pa.float16()),
        "flags": per_token(lambda r: r.flags, np.uint8, pa.uint8()),
    }, schema=schema())
    path = records_path(output_dir, step, attempt)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    try:
        pq.write_table(table, partial, row_group_size=ROWS_PER_GROUP, compression="zstd")
    except BaseException:
        partial.unlink(missing_ok=True)  # a full disk leaves no half file behind to fill it further
        raise
    partial.replace(path)  # a reader never opens half a file
    return path


# The retention may remove a file between any look at it and its opening (the writer's thread prunes while pages
# read): every reader opens without looking first, and a FileNotFoundError reads as the file being gone, never a 500.


def read_rollout(output_dir: str | os.PathLike, step: int, attempt: int, rollout_key: str) -> dict | None:
    """One rollout's records as plain lists (None where not recorded: no file, or no row of that key)."""
    try:
        return _read_row(records_path(output_dir, step, attempt), rollout_key)
    except FileNotFoundError:
        return None


def _read_row(path: Path, rollout_key: str) -> dict | None:
    """The row of ``rollout_key`` (None when the file holds none); FileNotFoundError when there is no file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path, filters=[("rollout_key", "=", rollout_key)])
    if table.num_rows == 0:
        return None
    return {name: values[0] for name, values in table.to_pydict().items()}


def read_step_summary(output_dir: str | os.PathLike, step: int, attempt: int) -> dict[str, dict] | None:
    """Each recorded rollout's advantage and mismatch count by rollout key, without reading its tokens."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(records_path(output_dir, step, attempt),
                              columns=["rollout_key", "advantage", "ratio_outside_tokens"])
    except FileNotFoundError:
        return None
    return {key: {"advantage": advantage, "ratio_outside_tokens": outside} for key, advantage, outside in zip(
        *(table.column(name).to_pylist() for name in ("rollout_key", "advantage", "ratio_outside_tokens")))}


class StepRecords:
    """Every recorded rollout of one step (each attempt's file), kept as Arrow columns: a rollout's row becomes
    Python lists only when asked for, so a full step (tens of millions of tokens) is never a Python object each."""

    def __init__(self, output_dir: str | os.PathLike, step: int, columns: Sequence[str] | None = None):
        import pyarrow.parquet as pq

        self._tables = []
        self._where: dict[str, tuple[int, int]] = {}
        for recorded_step, _, path in recorded_steps(output_dir):
            if recorded_step != step:
                continue
            try:
                table = pq.read_table(path, columns=None if columns is None else ["rollout_key", *columns])
            except FileNotFoundError:
                continue  # removed by the retention since it was listed
            for row, key in enumerate(table.column("rollout_key").to_pylist()):
                self._where[key] = (len(self._tables), row)
            self._tables.append(table)

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def __iter__(self):
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def get(self, key: str, default=None) -> dict | None:
        if key not in self._where:
            return default
        table_index, row = self._where[key]
        values = self._tables[table_index].slice(row, 1).to_pylist()[0]
        values.pop("rollout_key")
        return values

    def __getitem__(self, key: str) -> dict:
        values = self.get(key)
        if values is None:
            raise KeyError(key)
        return values

    def items(self):
        return ((key, self[key]) for key in self._where)


def step_records(output_dir: str | os.PathLike, step: int, columns: Sequence[str] | None = None) -> StepRecords:
    """Every recorded rollout of ``step``, by rollout key: ``columns`` (default all) as lists, read row by row."""
    return StepRecords(output_dir, step, columns)


def recorded_steps(output_dir: str | os.PathLike) -> list[tuple[int, int, Path]]:
    """(step, attempt, path) of every step's file, oldest step first."""
    folder = Path(output_dir) / FOLDER
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _FILE_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), path))
    return sorted(found)


def prune_records(output_dir: str | os.PathLike, keep_last_steps: int | None, current_attempt: int) -> list[Path]:
    """Delete the files of the steps older than the latest ``keep_last_steps`` steps up to where ``current_attempt``
    has come (every attempt's file of a kept step stays).

    Counted from the current attempt's newest step, not the newest step of any attempt: a resumed attempt replays
    the steps an earlier one wrote past its last checkpoint, and counting those would remove the resumed attempt's
    fresh files as soon as they are renamed in. The earlier attempt's files past that point stay until the current
    attempt has passed them: they are the only records of those rollouts."""
    if keep_last_steps is None:
        return []
    found = recorded_steps(output_dir)
    reached = max((step for step, attempt, _ in found if attempt == current_attempt), default=None)
    if reached is None:
        return []
    kept_steps = sorted({step for step, _, _ in found if step <= reached})[-keep_last_steps:]
    oldest_kept = kept_steps[0]
    removed = [path for step, _, path in found if step < oldest_kept]
    # a failed step's reason goes with the files of its time
    removed += [path for step, _, kind, path in _markers(output_dir) if kind == FAILED and step < oldest_kept]
    for path in removed:
        path.unlink(missing_ok=True)
    return removed


def _markers(output_dir: str | os.PathLike) -> list[tuple[int, int, str, Path]]:
    """(step, attempt, PENDING or FAILED, path) of every marker."""
    folder = Path(output_dir) / FOLDER
    if not folder.is_dir():
        return []
    found = []
    for path in folder.iterdir():
        match = _MARKER_NAME.match(path.name)
        if match:
            found.append((int(match.group(1)), int(match.group(2)), "." + match.group(3), path))
    return sorted(found)


# --- written off the step's path ----------------------------------------------------------------------------


class RecordsWriter:
    """Writes each step's records in a thread of its own, one file at a time, while the run trains on.

    ``submit`` hands a step over and returns at once, unless ``waiting_steps`` steps already wait for the thread:
    then it waits for room, so at most that many steps' records, besides the one being written, are held in memory.
    ``wait`` returns once every step handed over is written (or has failed); ``close`` waits, then ends the thread.
    A write that fails leaves its step's ``.failed`` marker with the reason and the files written before it as they
    were; its message waits in ``take_failures`` for the run's own thread to publish (the writer publishes nothing,
    so events keep their order). ``write`` is ``write_step_records``'s signature (tests hand a slow or failing one).
    The writer's own bookkeeping failing (a marker on a full disk, the retention) is reported the same way and never
    ends the thread: a dead thread would leave the next ``submit`` and every ``wait`` hanging, and the run with them
    (tests/learning/test_a_full_disk_never_stops_the_token_records_writer.py).
    """

    def __init__(self, output_dir: str | os.PathLike, attempt: int, keep_last_steps: int | None, token_texts, *,
                 write: Callable | None = None, waiting_steps: int = 1):
        if waiting_steps < 1:
            raise ValueError(f"waiting_steps is 1 or more (steps held while one is written), got {waiting_steps}")
        self.output_dir = Path(output_dir)
        self.attempt = attempt
        self.keep_last_steps = keep_last_steps
        self.token_texts = token_texts
        self._write = write or write_step_records
        self._queue: queue.Queue = queue.Queue(maxsize=waiting_steps)
        self._failures: list[str] = []
        self._failures_lock = threading.Lock()
        self._is_closed = False
        settle_interrupted_writes(self.output_dir)
        self._thread = threading.Thread(target=self._work, name="token-records-writer", daemon=True)
        self._thread.start()

    def submit(self, step: int, records: Sequence[TokenRecord]) -> None:
        if self._is_closed:
            raise RuntimeError("the token-records writer is closed; a run submits no step after its end")
        marker = marker_path(self.output_dir, step, self.attempt, PENDING)
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()  # before it is queued: a reader asking now hears "being written", never "not recorded"
        except OSError as error:  # a full disk: the write will say so too; the run goes on either way
            self._report(f"step {step}'s token records could not be marked as being written ({type(error).__name__}: "
                         f"{error}); until they are written a reader may hear 'not recorded'")
        self._queue.put((step, records))

    def wait(self) -> None:
        self._queue.join()

    def close(self) -> None:
        if self._is_closed:
            return
        self._is_closed = True
        self._queue.put(None)
        self._thread.join()

    def take_failures(self) -> list[str]:
        with self._failures_lock:
            failures, self._failures = self._failures, []
        return failures

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._write_one(*item)
            except Exception as error:  # noqa: BLE001 - reported; a dead thread would hang the next submit and wait
                self._report(f"the token-records writer failed on step {item[0]} ({type(error).__name__}: {error}) "
                             "and goes on with the next step")
            finally:
                self._queue.task_done()

    def _write_one(self, step: int, records: Sequence[TokenRecord]) -> None:
        pending = marker_path(self.output_dir, step, self.attempt, PENDING)
        try:
            self._write(self.output_dir, step, self.attempt, records, self.token_texts)
        except Exception as error:  # noqa: BLE001 - reported by the run's thread (take_failures), never swallowed
            reason = f"writing them failed: {type(error).__name__}: {error}"
            self._report(f"step {step}'s token records were not written ({reason}); its rollouts will show no "
                         f"tokens, and training goes on. Free disk space under {self.output_dir} or lower "
                         "schedule.keep_token_records if the disk is full")
            self._leave_failed_marker(step, reason)
            return
        finally:
            try:
                pending.unlink(missing_ok=True)  # after the rename or the failed marker: a reader sees one or the other
            except OSError as error:
                self._report(f"step {step}'s '{PENDING}' marker could not be removed ({type(error).__name__}: "
                             f"{error}); remove {pending} by hand, or the next attempt marks the step failed")
        try:
            prune_records(self.output_dir, self.keep_last_steps, self.attempt)
        except Exception as error:  # noqa: BLE001 - as above
            self._report(f"step {step}'s token records were written, but the retention (schedule.keep_token_records="
                         f"{self.keep_last_steps}) could not remove older steps' files: {type(error).__name__}: {error}")

    def _leave_failed_marker(self, step: int, reason: str) -> None:
        """The reason beside the step's file-never-to-be; on a full disk even that can fail, which is reported too."""
        failed = marker_path(self.output_dir, step, self.attempt, FAILED)
        try:
            failed.write_text(reason)
        except OSError as error:
            failed.unlink(missing_ok=True)  # a half-written reason would be read as the whole one
            self._report(f"step {step}'s '{FAILED}' marker could not be written either ({type(error).__name__}: "
                         f"{error}): its rollouts will say no token records were written, without this reason")

    def _report(self, message: str) -> None:
        with self._failures_lock:
            self._failures.append(message)


def settle_interrupted_writes(output_dir: str | os.PathLike) -> None:
    """What a run that was killed mid-write left (a pending marker, a half file) says so, for good."""
    folder = Path(output_dir) / FOLDER
    if not folder.is_dir():
        return
    for path in folder.glob("*.partial"):
        path.unlink(missing_ok=True)
    for step, attempt, kind, path in _markers(output_dir):
        if kind == PENDING:
            marker_path(output_dir, step, attempt, FAILED).write_text(
                "the run stopped (killed) before they were written")
            path.unlink(missing_ok=True)


class RecordsState(enum.StrEnum):
    RECORDED = "recorded"
    PENDING = "pending"  # not written yet: the step's file is still to come
    NOT_RECORDED = "not_recorded"  # never will be


@dataclass(frozen=True)
class RolloutRecords:
    """One rollout's records, or why there are none: ``reason`` says it in words ('' when recorded)."""

    state: RecordsState
    record: dict | None = None
    reason: str = ""


def look_up_rollout(output_dir: str | os.PathLike, step: int, attempt: int, rollout_key: str, *,
                    is_being_trained: bool) -> RolloutRecords:
    """One rollout's records, or whether they are still to come or never will be.

    ``is_being_trained``: the run is live and this is its current attempt, so a step it has not written yet may
    still be written. A step newer than every step written counts as pending then: its file comes after its
    learner step, and the rollout is seen before that (it is published when scored)."""
    path = records_path(output_dir, step, attempt)
    for _ in range(2):  # the writer renames the file in, then removes the marker: look at the file again after
        try:
            record = _read_row(path, rollout_key)
        except FileNotFoundError:
            pass  # not written yet, never, or removed by the retention (even a moment ago): the markers tell
        else:
            if record is None:
                return RolloutRecords(RecordsState.NOT_RECORDED, reason=(
                    f"step {step}'s records hold no row for this answer: it was not trained (censored, empty, or "
                    "dropped as too stale)"))
            return RolloutRecords(RecordsState.RECORDED, record)
        try:
            failure = marker_path(output_dir, step, attempt, FAILED).read_text(errors="replace").strip()
        except FileNotFoundError:
            pass
        else:
            return RolloutRecords(RecordsState.NOT_RECORDED, reason=f"step {step}'s token records: {failure}")
        if not marker_path(output_dir, step, attempt, PENDING).exists():
            break
        if is_being_trained:
            return RolloutRecords(RecordsState.PENDING, reason=(
                f"step {step}'s token records are being written, in the background after its learner step"))
    found = recorded_steps(output_dir)
    written = [recorded for recorded, _, _ in found]
    # A resumed attempt replays steps an earlier one wrote: only its own files say how far it has come.
    written_by_this_attempt = [recorded for recorded, by, _ in found if by == attempt]
    if is_being_trained and (not written_by_this_attempt or step > max(written_by_this_attempt)):
        return RolloutRecords(RecordsState.PENDING, reason=(
            f"step {step}'s token records are written after its learner step, which has not finished"))
    if written and step < min(written):
        return RolloutRecords(RecordsState.NOT_RECORDED, reason=(
            f"step {step}'s file was removed by the run's retention (schedule.keep_token_records keeps the latest "
            f"steps' records; the oldest kept is step {min(written)})"))
    return RolloutRecords(RecordsState.NOT_RECORDED, reason=(
        f"no token records were written for step {step} (a run that ended before its learner step, or one from "
        "before token records existed)"))

