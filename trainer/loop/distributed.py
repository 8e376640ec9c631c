"""Data-parallel training: one process per learner GPU, each one a whole trainer.

Each rank is a learner-rank actor the run's driver placed (trainer/loop/ray_driver.py), on any node of the
cluster, given torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT: learner rank
0's node and a port free there), so the protocol below is the one torchrun's ranks ran, and still run where a
test starts ranks itself.

Prompt-parallel, as verl's colocated mode is. Every rank owns one GPU, its own Lean client and
one FSDP shard of the learner. Rollouts come from engines that span ``tp`` consecutive ranks
(``EngineGroups``): vLLM with ``rollout.vllm_tensor_parallel_size = tp``, each rank holding one
tensor-parallel shard of its group's engine (vLLM's ``external_launcher``: every rank of the
group runs the engine in its own process and calls ``generate`` with the same prompts, seeds
and request ids, and gets the same answers); with tp = 1 (and on CPU, transformers sampling a
copy of the policy) every rank is an engine of its own. Each step:

1. every rank draws the same prompt slots (the same seeded rng, the same replay buffer, the same
   prompt-selection streaks: trainer/loop/prompt_selection.py); each engine group rolls out the
   slots with ``slot_index % engines == engine``, so a GRPO group stays whole on one engine;
2. the ranks of a group share the scoring: rank ``member`` of the group scores (sends to Lean)
   and publishes (ROLLOUT_FINISHED) the answers at positions ``member, member + tp, ...`` of its
   engine's output, as they finish, so each answer is scored and published once;
3. the scored rollouts are all-gathered in host memory (a gloo group), so every rank holds
   the whole batch in slot order, each rollout once. Advantages, mini-batches, retries and
   metrics are then computed from the same data on every rank: the replay buffers stay
   identical without a protocol of their own, the next step draws the same slots everywhere,
   and rank 0's METRICS are the global ones;
4. the learner step: the learner splits the shared batch by sequence across all ranks and FSDP
   averages the gradients, so the update equals one process's update on the whole batch
   (``mini_batch_prompts`` prompts per optimizer step, world-wide) whatever tp is;
5. every rank gathers the full weights by name and pushes them into its own engine (vLLM's
   ``load_weights`` keeps this rank's tensor-parallel shard of each).

Why whole rollouts rather than just new retries and metric sums: the learner already expects
every rank to hold the same sequence list (it takes ``sequences[rank::world_size]`` and pads
ranks to equal passes), and one exchange per step then serves advantages, retries and
metrics alike. The cost is the rollouts' text and token ids once per step, small next to
generating them.

Evaluation is split the same way, with one more exchange inside each engine group: the ranks
of a group must build the same retry prompts from the first attempts' verdicts, so they pool
their shares of the scoring before the retries are generated (``engine_peers``).

Events: rank r numbers its events ``first_seq + n·world_size + r``, so numbers never clash,
and ranks align ``n`` at each step's start, so the platform's order by seq keeps every
rank's rollouts of a step after that step's STEP_STARTED. Rollouts are published by the rank
that scored them; every other event by rank 0 alone.

Failures: a rank that fails records the reason in the process group's key-value store
before it leaves. Work done between collectives (generation, scoring, evaluation) is
exchanged with a status, so every rank leaves that exchange together and rank 0 fails the run
with the peer's reason. A failure inside a collective (the learner step, the weight push, a
tensor-parallel engine's forward pass) reaches rank 0 as a broken collective (the driver ends a rank's
process once its run returns, as torchrun's rank ended) or as a cancel; rank 0 then reports the first recorded
failure instead of that echo. A rank whose actor dies (its node lost) is the driver's to report. Should rank 0
hang in a collective that will never complete (NCCL waits for a missing rank), a watch thread
publishes the recorded failure and ends the process after a grace period.

The asynchronous loop (``rollout.max_staleness`` η ≥ 1, verl's one-step-off-policy layout): the driver
starts only the learner ranks, one per learner GPU (``cluster.num_gpus − cluster.rollout_gpus``); learner rank 0 starts the
rollout pool, one Ray actor per engine in the run's placement group, on any node
(trainer/asynchronous/engine_actors.py ``RolloutEnginePool``, placed by trainer/cluster/placement.py),
and owns the one ``RolloutPipeline`` (trainer/asynchronous/pipeline.py): it hands batches to the pool, sends
each answer to Lean, scores and publishes every rollout. Each step rank 0 takes the scored batch and
hands it whole to every learner rank (``SharedBatchPipeline``, one exchange over the gloo group), so
advantages, retries and metrics are computed from the same data everywhere, as above. The other
ranks draw the same prompts at the same moments as rank 0 (the same seeded rng and replay buffer),
so their replay buffers, random streams and checkpointed in-flight batches stay rank 0's; a rank
whose prompts differ from rank 0's stops the run saying so. After each update every rank joins the
full-weight gather (as a checkpoint does) and rank 0 broadcasts the weights to every engine of the pool
(``PoolWeightHandle``) over the pool's own weight group (trainer/asynchronous/weight_broadcast.py), never the
learner ranks' group: the pool is no rank of the run. An engine actor that dies fails the run on every rank
with its reason (``EngineActorLost``, an infrastructure failure naming the engine and its node), at the next
exchange; cancelling takes the pool down with rank 0, which owns its actors. Evaluations run on the pool too, through rank 0.

Why one piece: the rank group, the engine groups and ``DataParallelRun`` are one protocol (which
rank rolls out, scores and publishes what, and how a failure on one rank ends every rank); its steps
read in order here.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from trainer.asynchronous.generator_process import ENGINE_SEED_STRIDE, GeneratorFailed
from trainer.asynchronous.pipeline import RolloutPipeline, TakenBatch
from trainer.config import RolloutEngineKind, RunConfig
from trainer.learning.learner import with_token_rates
from trainer.loop.driver import RunStatus, TrainingRun, publish_where_the_engines_sit, start_rollout_generators
from trainer.observability import packed_token_records
from trainer.observability.events import EventPublisher, EventType, TrainerEvent
from trainer.observability.gap import combine_train_inference_gaps
from trainer.ranks import (
    EngineGroups,
    RankPosition,
    check_world_fits_config,
    in_flight_share,
    lean_tool_calls_problem,
    owned_slot_indices,
    rollout_tensor_parallel_size,
)
from trainer.recipe.rollouts import Rollout
from trainer.rollout.base import rollout_dtype
from trainer.rollout.engines import build_engine
from trainer.rollout.replica import ReplicaRolloutEngine
from trainer.run.checkpoint import full_model_state_dict
from trainer.run.lifecycle import RunCancelled

EXIT_FAILED = 1
# The step's exchange waits for the slowest rank's generation and Lean checks: minutes at the
# recipe's 24k-token answers, so the driver's own group waits long; failures do not rely on it.
CONTROL_GROUP_TIMEOUT = timedelta(hours=2)
PEER_FAILURE_GRACE_S = 30.0
# Apart by more than any step's (prompt, sample) seed offsets, so ranks never share a random stream.
SAMPLING_SEED_STRIDE = ENGINE_SEED_STRIDE
_FAILURE_COUNT_KEY = "trainer/failures"
_FIRST_FAILURE_KEY = "trainer/first_failure"
_CANCELLED_KEY = "trainer/cancelled"
_PID_KEY = "trainer/pid/{rank}"  # each rank's process id, for rank 0's PeerExitWatch
_SAID_KEY = "trainer/said/{rank}"  # each rank's own word on its end, said before it can die of it
PEERS_JOINING_S = 600.0  # how long rank 0's exit watch waits for every rank's process id, all joining the group


class PeerRankFailed(RuntimeError):
    """Another rank failed; the message names the rank and its reason."""

    def __init__(self, rank: int, reason: str):
        super().__init__(f"rank {rank} {reason}")
        self.rank = rank
        self.reason = reason


# --- the ranks, together --------------------------------------------------------------------------


@dataclass
class _Share:
    kind: str  # "done", "failed" (this rank's own failure), "passed_on" (a peer's it learnt of) or "cancelled"
    value: Any = None
    reason: str = ""
    failed_rank: int | None = None  # the run rank whose failure this is, in whichever group it is exchanged


class RankGroup:
    """The driver's collectives (host memory, their own gloo group) and the run's failure record.

    ``rank`` is this process's rank in the run, ``world_size`` the number of ranks the group spans
    (the whole run's; one engine's for ``engine_peers``).
    """

    def __init__(self, rank: int, world_size: int, control_group=None, store=None):
        self.rank = rank
        self.world_size = world_size
        self.control_group = control_group
        self.store = store
        self._has_recorded_failure = False

    @classmethod
    def join(cls, position: RankPosition) -> RankGroup:
        """Join torchrun's process group (NCCL on CUDA, gloo on CPU), then open the driver's gloo group.

        The driver's exchanges get a group of their own so that they can never be matched
        against the learner's FSDP collectives, and so that they travel in host memory.
        """
        if not dist.is_initialized():
            if torch.cuda.is_available():
                torch.cuda.set_device(position.local_rank)
            dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
        control_group = dist.new_group(backend="gloo", timeout=CONTROL_GROUP_TIMEOUT)
        store = dist.distributed_c10d._get_default_store()
        group = cls(dist.get_rank(), dist.get_world_size(), control_group, store)
        store.set(_PID_KEY.format(rank=group.rank), f"{os.getpid()} {socket.gethostname()}")
        return group

    def join_engine_peers(self, groups: EngineGroups) -> RankGroup:
        """A group of this rank and the others of its engine, for exchanges within it (a collective: all ranks call it).

        Host memory (gloo), as the run's own exchanges: what goes through it is scored answers.
        """
        subgroup, _ = dist.new_subgroups_by_enumeration(groups.all_ranks(), timeout=CONTROL_GROUP_TIMEOUT,
                                                        backend="gloo")
        return RankGroup(self.rank, groups.tensor_parallel_size, subgroup, self.store)

    def all_gather(self, value: Any) -> list:
        gathered: list = [None] * self.world_size
        dist.all_gather_object(gathered, value, group=self.control_group)
        return gathered

    def gather_token_records(self, records: Sequence) -> list:
        """Every rank's token records on this group's rank 0, in rank order (an empty list on the others).

        As flat arrays (trainer/observability/packed_token_records.py): each rank's columns in one byte buffer, gathered
        as a tensor, and only the keys, advantages and lengths as objects. Pickling an h100x8 step's records object
        by object (tens of millions of tokens) costs more than the arrays themselves; the other ranks never read
        them, so they go to rank 0 alone.
        """
        packed = packed_token_records.pack_records(records)
        root = dist.get_global_rank(self.control_group, 0) if self.control_group is not None else 0
        sides: list | None = [None] * self.world_size if self.rank == root else None
        dist.gather_object(packed.side_data(), sides, dst=root, group=self.control_group)
        size = max(1, self.max_int(int(packed.buffer.size)))  # gather takes equal sizes: each rank pads to the largest
        padded = torch.zeros(size, dtype=torch.uint8)
        padded[: packed.buffer.size] = torch.from_numpy(packed.buffer)
        buffers = [torch.empty(size, dtype=torch.uint8) for _ in range(self.world_size)] if sides is not None else None
        dist.gather(padded, buffers, dst=root, group=self.control_group)
        if sides is None:
            return []
        gathered = []
        for (keys, advantages, lengths, has_engine), buffer in zip(sides, buffers):
            used = packed_token_records.packed_size(lengths)
            gathered += packed_token_records.unpack_records(packed_token_records.PackedRecords(
                keys, advantages, lengths, has_engine, buffer[:used].numpy()))
        return gathered

    def max_int(self, value: int) -> int:
        tensor = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self.control_group)
        return int(tensor.item())

    def barrier(self) -> None:
        dist.barrier(group=self.control_group)

    def exchange(self, produce: Callable[[], Any], during: str) -> list:
        """This rank's share of some local work, then every rank's share, in rank order.

        A share that raised is exchanged as a failure, so all ranks leave together: the
        failed rank re-raises its own error, the others raise PeerRankFailed with its reason.
        ``produce`` must be local work: a rank failing before a collective inside it would
        leave its peers waiting in that collective.
        """
        own_error: BaseException | None = None
        try:
            share = _Share("done", produce())
        except RunCancelled:
            share = _Share("cancelled")
        except PeerRankFailed as error:  # a failure this rank learned of in an exchange of its own: pass it on as it is
            own_error = error
            share = _Share("passed_on", reason=error.reason, failed_rank=error.rank)
        except Exception as error:  # noqa: BLE001 - any failure must reach rank 0
            own_error = error
            reason = f"failed during {during}: {type(error).__name__}: {error}"
            self.record_failure(reason)
            share = _Share("failed", reason=reason, failed_rank=self.rank)
        shares = self.all_gather(share)
        if own_error is not None:
            raise own_error
        first_hand = [other for other in shares if other.kind == "failed"]
        passed_on = [other for other in shares if other.kind == "passed_on"]
        if first_hand or passed_on:
            failure = (first_hand or passed_on)[0]
            raise PeerRankFailed(failure.failed_rank, failure.reason)
        if any(other.kind == "cancelled" for other in shares):
            raise RunCancelled()
        return [other.value for other in shares]

    def record_failure(self, reason: str) -> None:
        """Leave the reason where every rank can read it, before this rank stops answering collectives."""
        if self.store is None or self._has_recorded_failure:
            return
        self._has_recorded_failure = True
        self.say("failed")
        self.record_failure_of(self.rank, reason)

    def record_failure_of(self, rank: int, reason: str) -> None:
        """Record ``rank``'s failure, unless one was recorded first: this rank's own, or a peer's it saw die."""
        try:
            if self.store.add(_FAILURE_COUNT_KEY, 1) == 1:
                self.store.set(_FIRST_FAILURE_KEY, f"{rank}\n{reason}")
        except Exception:  # noqa: BLE001 - the store left with torchrun's agent; this rank's own log keeps the reason
            pass

    def say(self, word: str) -> None:
        """This rank's own word on how it ends ("stopping", "cancelled", "failed"), said before it can die of it:
        a peer whose process ends without one was killed from outside (``PeerExitWatch``)."""
        if self.store is None:
            return
        try:
            self.store.set(_SAID_KEY.format(rank=self.rank), word)
        except Exception:  # noqa: BLE001 - the store left with torchrun's agent: the run is ending anyway
            pass

    def has_said(self, rank: int) -> bool:
        """Whether ``rank`` said how it ends; True where the store cannot be asked, so no kill is ever made up."""
        try:
            return bool(self.store.check([_SAID_KEY.format(rank=rank)]))
        except Exception:  # noqa: BLE001 - as the docstring says
            return True

    def record_cancellation(self, signal_name: str) -> None:
        """Say, before this rank leaves, that it was cancelled: a peer whose collective it breaks by leaving
        must report the cancel, not the broken collective."""
        if self.store is None:
            return
        self.say("cancelled")
        try:
            self.store.set(_CANCELLED_KEY, f"{self.rank}\n{signal_name}")
        except Exception:  # noqa: BLE001 - the store left with torchrun's agent; the peers then see a broken collective
            pass

    def cancellation(self) -> tuple[int, str] | None:
        """(rank, signal name) of a rank that was cancelled, or None."""
        if self.store is None:
            return None
        try:
            if not self.store.check([_CANCELLED_KEY]):
                return None
            rank, _, signal_name = self.store.get(_CANCELLED_KEY).decode().partition("\n")
            return int(rank), signal_name
        except Exception:  # noqa: BLE001 - no store to ask: the caller reports what it saw itself
            return None

    def first_failure(self, wait_s: float = 5.0) -> tuple[int, str] | None:
        """(rank, reason) of the run's first recorded failure, or None."""
        if self.store is None:
            return None
        try:
            if self.store.add(_FAILURE_COUNT_KEY, 0) == 0:
                return None
            # The first failing rank counts itself before it writes its reason.
            self.store.wait([_FIRST_FAILURE_KEY], timedelta(seconds=wait_s))
            rank, _, reason = self.store.get(_FIRST_FAILURE_KEY).decode().partition("\n")
            return int(rank), reason
        except Exception:  # noqa: BLE001 - no store to ask: the caller reports what it saw itself
            return None


# --- events -------------------------------------------------------------------------------------------


class RankEventPublisher(EventPublisher):
    """Events of one rank of a data-parallel run: interleaved numbers, rank 0 speaking for the run.

    Rank r's n-th event has seq ``first_seq + n·world_size + r``. Other ranks publish only their
    own rollouts. Nothing goes out after RUN_FINISHED: the failure watch and the main thread
    may both try to finish the run, and only the first may.
    """

    def __init__(self, run_id: str, sink, first_seq: int = 0, *, rank: int, world_size: int, attempt: int = 1):
        super().__init__(run_id, sink, first_seq, attempt=attempt)
        self.first_seq = first_seq
        self.rank = rank
        self.world_size = world_size
        self.next_number = 0
        self.is_finished = False
        self._numbering_lock = threading.Lock()

    def publish(self, type: EventType, payload=None) -> TrainerEvent | None:
        if self.rank != 0 and type is not EventType.ROLLOUT_FINISHED:
            return None
        if hasattr(payload, "model_dump"):
            payload = payload.model_dump(mode="json")
        with self._numbering_lock:
            if self.is_finished:
                return None
            self.is_finished = type is EventType.RUN_FINISHED
            seq = self.seq_of(self.next_number)
            self.next_number += 1
            event = self.make_event(seq, type, payload)
        self.sink.write(event)
        return event

    def seq_of(self, number: int, rank: int | None = None) -> int:
        return self.first_seq + number * self.world_size + (self.rank if rank is None else rank)

    def align(self, number: int) -> None:
        """Continue numbering from ``number`` (the highest of all ranks), never going back."""
        with self._numbering_lock:
            self.next_number = max(self.next_number, number)


class PeerFailureWatch:
    """Rank 0's guard against waiting forever in a collective a failed peer will never join.

    Once a peer's failure has been on record for ``grace_s`` and the run has not finished by
    itself, it publishes the failure (ERROR, RUN_FINISHED) and ends the process.
    """

    def __init__(self, group: RankGroup, publisher: RankEventPublisher, current_step: Callable[[], int],
                 grace_s: float = PEER_FAILURE_GRACE_S, poll_s: float = 1.0,
                 exit_process: Callable[[int], Any] = os._exit):
        self.group = group
        self.publisher = publisher
        self.current_step = current_step
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.exit_process = exit_process
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="peer-failure-watch", daemon=True)

    def __enter__(self) -> PeerFailureWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=self.poll_s + 10)

    def _watch(self) -> None:
        while not self._stop.wait(self.poll_s):
            failure = self.group.first_failure(wait_s=self.poll_s)
            if failure is None or failure[0] == self.group.rank:
                continue  # this rank's own failure is reported by its main thread
            if self._stop.wait(self.grace_s) or self.publisher.is_finished:
                return
            rank, reason = failure
            message = f"rank {rank} {reason}"
            step = self.current_step()
            self.publisher.publish(EventType.ERROR, {"step": step, "message": message})
            if self.publisher.publish(EventType.RUN_FINISHED, {"status": RunStatus.FAILED.value, "reason": message,
                                                               "step": step}) is not None:
                self.exit_process(EXIT_FAILED)
            return


class PeerExitWatch:
    """Rank 0's eye on its peers' processes, so that a rank killed from outside fails the run naming the signal.

    When a rank dies of SIGKILL (the kernel's OOM killer sends it) it says nothing, and torchrun's agent answers
    its death by sending SIGTERM to the other ranks (torch/distributed/elastic/agent/server/api.py ``_invoke_run``:
    with no restarts left it stops the worker group, ``_shutdown(death_sig=SIGTERM)``). Nothing in that SIGTERM
    tells it from Ray's stop of a cancelled run, which also reaches every rank, so rank 0 would end the run
    "cancelled". What does tell them apart: a rank told to stop says so in the store at once (``RankGroup.say``,
    before it can die of it), and a failing rank records its failure; a rank killed from outside leaves neither.
    So every rank leaves its process id in the store, and this watch waits on each peer's process (a pidfd): a peer
    gone without a word is recorded as the run's first failure, with the signal that killed it, read from the dead
    process's exit status (/proc/<pid>/stat, field 52) before torchrun's agent reaps it. ``settle`` does the same
    at once, for ``outcome_of`` to call before it reads the first failure.
    Tested with a real SIGKILL under torchrun: tests/lifecycle/test_a_learner_rank_killed_from_outside_fails_the_run.py.
    """

    def __init__(self, group: RankGroup, current_step: Callable[[], int], peers_joining_s: float = PEERS_JOINING_S):
        self.group = group
        self.current_step = current_step
        self.peers_joining_s = peers_joining_s
        self._lock = threading.Lock()
        self._pidfds: dict[int, int] = {}  # peer rank -> pidfd, once every peer's process id is known
        self._pids: dict[int, int] = {}
        self._settled: set[int] = set()
        self._stop_read, self._stop_write = os.pipe()
        self._thread = threading.Thread(target=self._watch, name="peer-exit-watch", daemon=True)

    def __enter__(self) -> PeerExitWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        os.write(self._stop_write, b"x")
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            os.close(self._stop_read)
            os.close(self._stop_write)
            with self._lock:  # a late settle (the stop watchdog) then finds nothing to poll
                for pidfd in self._pidfds.values():
                    os.close(pidfd)
                self._pidfds.clear()

    def settle(self, wait_s: float = 0.0) -> None:
        """Record now any peer already gone without a word; ``wait_s`` is how long to wait for one to be gone (a
        broken collective may reach this rank a moment before the dead peer's process has finished exiting)."""
        with self._lock:
            waiting = {pidfd: rank for rank, pidfd in self._pidfds.items() if rank not in self._settled}
            if not waiting:
                return
            poller = select.poll()
            for pidfd in waiting:
                poller.register(pidfd, select.POLLIN)
            for pidfd, _ in poller.poll(int(wait_s * 1000)):
                self._settle(waiting[pidfd])

    def _watch(self) -> None:
        peers = [rank for rank in range(self.group.world_size) if rank != self.group.rank]
        keys = [_PID_KEY.format(rank=rank) for rank in peers]
        try:
            self.group.store.wait(keys, timedelta(seconds=self.peers_joining_s))
            said = {rank: self.group.store.get(key).decode().split(" ", 1) for rank, key in zip(peers, keys)}
            # Only a process on this host can be watched; a peer on another node that dies is the driver's to
            # report (its actor's death, trainer/loop/ray_driver.py), as its node's death is.
            pids = {rank: int(pid) for rank, (pid, host) in said.items() if host == socket.gethostname()}
        except Exception:  # noqa: BLE001 - no store, or a peer that never joined: its failure reaches rank 0 otherwise
            return
        poller = select.poll()
        poller.register(self._stop_read, select.POLLIN)
        with self._lock:
            for rank, pid in pids.items():
                try:
                    self._pidfds[rank] = os.pidfd_open(pid)
                except ProcessLookupError:
                    continue  # gone and reaped before it could be watched: too late to read how it died
                self._pids[rank] = pid
                poller.register(self._pidfds[rank], select.POLLIN)
        by_pidfd = {pidfd: rank for rank, pidfd in self._pidfds.items()}
        while True:
            for ready, _ in poller.poll():
                if ready == self._stop_read:
                    return
                poller.unregister(ready)
                with self._lock:
                    self._settle(by_pidfd[ready])

    def _settle(self, rank: int) -> None:
        """``rank``'s process has exited: record its death as the run's failure if it left without a word."""
        if rank in self._settled:
            return
        self._settled.add(rank)
        status = exit_status_of_unreaped(self._pids[rank])  # first: the agent reaps it within its monitor interval
        if status is not None and os.WIFEXITED(status):
            return  # it ended by itself: what it recorded (or its success) speaks for it
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGTERM, signal.SIGINT):
            return  # stopped, by a cancel or by torchrun, if before its handler was installed (start-up)
        if self.group.has_said(rank):
            return  # told to stop (a cancel) or failed, and said so before it died
        self.group.record_failure_of(rank, killed_from_outside_reason(status, self.current_step()))


def exit_status_of_unreaped(pid: int) -> int | None:
    """The wait status of process ``pid`` if it has exited and its parent has not reaped it yet (a zombie's
    /proc/<pid>/stat field 52, Linux ≥ 3.5); None otherwise."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # from field 3 (the state) on: the name before may hold spaces
    if len(fields) < 50 or fields[0] != "Z":
        return None
    return int(fields[49])


def killed_from_outside_reason(status: int | None, step: int) -> str:
    """How a rank that died without a word ended, for "rank N <reason>"."""
    if status is not None and os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "an unnamed signal"
        cause = ", as the kernel's OOM killer sends when the node runs out of memory" if name == "SIGKILL" else ""
        return (f"was killed by signal {number} ({name}) during step {step}{cause}; nobody cancelled the run. "
                "Look for the kill in the node's kernel log (dmesg), and lower the memory the run needs if it was "
                "the OOM killer")
    return (f"ended during step {step} without a word: its process is gone and it had recorded neither a failure "
            "nor a stop, as when it is killed from outside (SIGKILL, as the kernel's OOM killer sends); nobody "
            "cancelled the run. Look for the kill in the node's kernel log (dmesg)")


# --- rollouts on a sharded learner ----------------------------------------------------------------------


def build_rank_engine(config: RunConfig, model, tokenizer):
    """This rank's rollout engine for a sharded ``model``."""
    if config.rollout.engine is RolloutEngineKind.VLLM:
        # vLLM keeps its own copy of the weights; with several ranks it joins them through its
        # external launcher, each engine spanning vllm_tensor_parallel_size consecutive ranks
        # (vllm_engine.from_config).
        return build_engine(config, model, tokenizer)
    return ReplicaRolloutEngine.of(model, tokenizer, rollout_dtype(config))


# --- the asynchronous loop: learner ranks fed by a rollout pool -------------------------------------------


class PoolWeightHandle:
    """What a learner rank holds of the rollout pool: rank 0 the pool itself, every rank its part in the weight gather.

    The learner is sharded, so every rank must join each gather (a collective) even though only rank 0
    sends the result. A pool that has died is not raised here, between two collectives, where the
    other ranks could not hear of it: its failure is raised inside the next step's exchange
    (``SharedBatchPipeline.take``), so every rank stops with the generator's reason.
    """

    def __init__(self, pool=None):
        self.pool = pool
        self.failure: GeneratorFailed | None = None  # the pool's death, kept for the next exchange

    @property
    def pushed_version(self) -> int | None:
        return self.pool.pushed_version

    def push_weights(self, model, version: int | None = None) -> None:
        state_dict = full_model_state_dict(model)  # every rank gathers; rank 0 alone gets the tensors
        if self.pool is None:
            return
        try:
            self.pool.push_state_dict(state_dict, version)
        except GeneratorFailed as error:
            self.failure = error  # raised at the next exchange (see the class's docstring)

    def submit(self, prompt_ids, sampling, progress_interval_s=None):
        return self.pool.submit(prompt_ids, sampling, progress_interval_s)

    def answers_of(self, job, progress=None):
        return self.pool.answers_of(job, progress)

    def busy_seconds(self, start: float, end: float) -> float:
        return self.pool.busy_seconds(start, end)

    def generate(self, prompts, sampling, progress=None):
        return self.pool.generate(prompts, sampling, progress)

    def sleep(self) -> None:
        """Nothing to free: the pool's memory is on its own GPUs, never the learner's."""

    def wake(self) -> None:
        """Nothing to take back (see ``sleep``)."""

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class SharedBatchPipeline:
    """Rank 0's ``RolloutPipeline``, each of its scored batches handed whole to every learner rank.

    The other ranks keep rank 0's books without generating: they draw each step's prompts at the moment
    rank 0 hands that step to the pool (the same rng, the same replay buffer, the same bound: rank 0's
    pushed version is the step just trained), so their replay buffers and random streams stay rank 0's
    and every rank's checkpoint names the same batches in flight.
    """

    def __init__(self, run: DataParallelRun, total_steps: int, in_flight_slots):
        self.run = run
        self.total_steps = total_steps
        self.source = RolloutPipeline(run, total_steps, in_flight_slots) if run.group.rank == 0 else None
        self._drawn: dict[int, list] = {}  # the other ranks' copies of the batches in flight
        self._restored = {step: slots for step, slots in in_flight_slots if step > run.step}
        self._next_step = run.step + 1

    def fill(self) -> None:
        if self.source is not None:
            if self.run.engine.failure is not None:
                return  # nothing more to hand a dead pool; the next take raises why
            try:
                self.source.fill()
            except GeneratorFailed as error:
                self.run.engine.failure = error  # raised inside the next exchange, where every rank hears it
            return
        version = self.run.step  # rank 0's pool has just been sent the weights of the step trained
        max_staleness = self.run.config.rollout.max_staleness
        while self._next_step <= self.total_steps and self._next_step - 1 - version <= max_staleness:
            step = self._next_step
            self._drawn[step] = self._restored.pop(step, None) or self.run.sample_prompts(step)
            self._next_step += 1

    def take(self, step: int) -> TakenBatch:
        def rank_zeros_batch():
            if self.source is None:
                return None
            if self.run.engine.failure is not None:
                raise self.run.engine.failure
            return self.source.take(step)

        taken: TakenBatch = self.run.group.exchange(rank_zeros_batch, f"step {step}")[0]
        drawn = [slot.prompt_ids for slot in self._drawn.pop(step, [])]
        if self.source is None and drawn != [slot.prompt_ids for slot in taken.slots]:
            raise RuntimeError(
                f"rank {self.run.group.rank} drew other prompts for step {step} than rank 0, whose batch it was "
                "handed: their random streams or replay buffers differ, so their checkpoints would too; this is a "
                "bug of trainer/loop/distributed.py (the ranks must sample at the same moments from the same state)")
        return taken

    def in_flight_slots(self):
        if self.source is not None:
            return self.source.in_flight_slots()
        return sorted(self._drawn.items())


# --- the run ----------------------------------------------------------------------------------------------


@dataclass
class RolloutShare:
    """One rank's scored rollouts of a step, and what its metrics need from that rank."""

    rollouts: list[Rollout]
    generation_s: float
    verification_tail_s: float
    verifier_cache_hits: int = 0
    verifier_cache_misses: int = 0
    next_event_number: int = 0


def combine_learner_metrics(per_rank: Sequence[dict]) -> dict:
    """One learner step's metrics over all ranks, as one process training the whole batch reports them.

    Each rank's loss is its part of the batch scaled by world_size (the learner's micro-batch
    scale), so their mean is the batch's loss; tokens and sequences add up; clip fractions are
    recounted over all tokens (None when no rank trained a token); the gradient norm is already
    global (clipping reduces it); the train–inference gap covers every rank's tokens.
    """
    combined = dict(per_rank[0])
    tokens = sum(metrics["tokens"] for metrics in per_rank)
    combined["loss"] = sum(metrics["loss"] for metrics in per_rank) / len(per_rank)
    combined["trained_sequences"] = sum(metrics["trained_sequences"] for metrics in per_rank)
    combined["tokens"] = tokens
    for name in ("clip_low", "clip_high", "dual_clip"):
        combined[f"{name}_tokens"] = sum(metrics[f"{name}_tokens"] for metrics in per_rank)
    combined["seconds"] = max(metrics["seconds"] for metrics in per_rank)
    combined.update(combine_train_inference_gaps(per_rank))
    return with_token_rates(combined)


class DataParallelRun(TrainingRun):
    """One rank of a data-parallel run; every rank runs one, rank 0 speaks for the run."""

    _peer_exit_watch: PeerExitWatch | None = None  # rank 0's, while it runs

    def __init__(self, config: RunConfig, problems: Sequence, output_dir, publisher: RankEventPublisher, *,
                 group: RankGroup, peer_failure_grace_s: float = PEER_FAILURE_GRACE_S, **options):
        check_world_fits_config(config, group.world_size)
        super().__init__(config, problems, output_dir, publisher, **options)
        self.publisher: RankEventPublisher = publisher
        self.group = group
        # Fed by a rollout pool (η ≥ 1) no learner rank holds an engine: rank 0 alone speaks to the pool.
        self.engine_groups = EngineGroups(group.world_size, 1 if self.is_asynchronous
                                          else rollout_tensor_parallel_size(config))
        self.engine_index = 0 if self.is_asynchronous else self.engine_groups.engine_of(group.rank)
        # The other ranks of this rank's engine, for the evaluation's exchange within it; None at tp 1.
        self.engine_peers: RankGroup | None = None
        self.peer_failure_grace_s = peer_failure_grace_s
        self._is_cancelling = False
        self._verifier_cache_counts = (0, 0)

    # --- start and end ---------------------------------------------------------------------------

    def verifier_config(self):
        # verifier.max_in_flight is the run's, shared by the ranks that score: every rank its share of the
        # training step's scoring, or rank 0 all of it when a rollout pool feeds the run (rank 0 scores alone).
        scoring_ranks = 1 if self.is_asynchronous else self.group.world_size
        share = in_flight_share(self.config.verifier.max_in_flight, scoring_ranks, self.group.rank)
        return self.config.verifier.model_copy(update={"max_in_flight": share})

    def run(self) -> RunStatus:
        if self.group.rank != 0:
            return super().run()
        with (PeerFailureWatch(self.group, self.publisher, lambda: self.step, self.peer_failure_grace_s),
              PeerExitWatch(self.group, lambda: self.step) as self._peer_exit_watch):
            return super().run()

    def _on_sigterm(self, signum, frame) -> None:
        # torchrun passes Ray's SIGTERM on and may send another while the run winds down;
        # a second RunCancelled would cut off the final events.
        if self._is_cancelling:
            return
        self._is_cancelling = True
        self._start_stop_deadline()
        raise RunCancelled()

    def _start_stop_deadline(self) -> None:
        self.group.say("stopping")  # first: a rank that dies of the stop must not read as killed (PeerExitWatch)
        super()._start_stop_deadline()

    def outcome_when_cut_short(self, signal_name: str, deadline_s: float) -> tuple[RunStatus, str]:
        # Rank 0 stuck in a collective with a peer that torchrun's SIGTERM followed: the peer's death is the end.
        if self._peer_exit_watch is not None:
            self._peer_exit_watch.settle()
        first = self.group.first_failure(wait_s=1.0)
        if first is not None and first[0] != self.group.rank:
            rank, reason = first
            return RunStatus.FAILED, f"rank {rank} {reason}"
        return super().outcome_when_cut_short(signal_name, deadline_s)

    def outcome_of(self, error: BaseException) -> tuple[RunStatus, str]:
        if isinstance(error, PeerRankFailed):
            return RunStatus.FAILED, str(error)
        if self._peer_exit_watch is not None:
            # A peer killed from outside is the run's failure, whatever this rank saw of it: torchrun's SIGTERM
            # (sent once the agent has reaped the dead rank, so it is gone by now), or a broken collective, which
            # can come a moment before the dead process has finished exiting.
            self._peer_exit_watch.settle(wait_s=0.0 if isinstance(error, RunCancelled) else 0.5)
        if isinstance(error, RunCancelled):
            self.group.record_cancellation(error.signal_name)
        else:
            cancelled = self.group.cancellation()
            if cancelled is not None and cancelled[0] != self.group.rank:
                # torchrun passes the cancel to every rank; one that left first breaks this rank's collective.
                rank, signal_name = cancelled
                return RunStatus.CANCELLED, f"stopped by {signal_name} during step {self.step} (rank {rank} first)"
            during = f"step {self.step}" if self.step else "start-up"
            self.group.record_failure(f"failed during {during}: {type(error).__name__}: {error}")
        first = self.group.first_failure()
        if first is not None and first[0] != self.group.rank:
            # What this rank saw (a broken collective, torchrun's SIGTERM) echoes that rank's failure.
            rank, reason = first
            return RunStatus.FAILED, f"rank {rank} {reason}"
        return super().outcome_of(error)

    def _start_generator_process(self) -> None:
        """Rank 0 starts the rollout pool; every rank joins the first weight gather (see the module's docstring)."""
        if self.engine is not None:
            raise ValueError("an asynchronous run (rollout.max_staleness ≥ 1) generates on its rollout pool; "
                             "pass no engine, or set rollout.max_staleness=0")

        started = []

        def start_pool_on_rank_zero() -> None:
            if self.group.rank == 0:
                # Rank 0 scores for a pool-fed run, with the whole verifier.max_in_flight: the pool's snippets too.
                started.append(start_rollout_generators(self.config, self.tokenizer, ask_lean=self._ask_lean))
                publish_where_the_engines_sit(self.config, self.publisher, started[0])

        # Exchanged, so a pool that cannot start fails every rank at start-up with its reason.
        self.group.exchange(start_pool_on_rank_zero, "start-up")
        self.engine = PoolWeightHandle(started[0] if started else None)
        self.engine.push_weights(self.model, version=self.step)
        self._startup_notes.append((
            f"asynchronous RL: {self.group.world_size} learner rank(s) train while a rollout pool "
            f"(cluster.rollout_gpus {self.config.cluster.rollout_gpus}) writes the next batches; a batch is trained at most {self.config.rollout.max_staleness} update(s) after "
            f"the weights that wrote it (rollout.max_staleness), its loss weighted by min(π_prox/π_behaviour, "
            f"{self.config.loss.behaviour_is_cap:g})", "info"))

    def rollout_pipeline(self, total_steps: int) -> SharedBatchPipeline:
        return SharedBatchPipeline(self, total_steps, self._in_flight_slots)

    def _generation_idle_s(self, ended: float, timings: dict) -> float | None:
        if self.pipeline is not None and self.group.rank != 0:
            return None  # only rank 0 sees the pool, and only rank 0's metrics are published
        return super()._generation_idle_s(ended, timings)

    def _start_rollouts_and_scoring(self) -> None:
        if self.engine_groups.tensor_parallel_size > 1 and self.engine_peers is None:
            self.engine_peers = self.group.join_engine_peers(self.engine_groups)  # a collective: all ranks, in order
        if self.engine is None:
            self.engine = build_rank_engine(self.config, self.model, self.tokenizer)  # gathers weights: all ranks
        # The Lean client and its health check are this rank's own: exchanged, so a rank that
        # cannot reach Lean fails the run at start-up with its reason.
        self.group.exchange(super()._start_rollouts_and_scoring, "start-up")

    # --- one training step -------------------------------------------------------------------------

    def publish_step_started(self, step: int) -> None:
        self._align_event_numbers()  # this step's rollouts, from any rank, come after its STEP_STARTED
        super().publish_step_started(step)

    def roll_out_batch(self, slots, step: int):
        # Every rank drew the same slots (the same seeded rng, the same replay buffer); each engine rolls out its own.
        mine = owned_slot_indices(len(slots), self.engine_index, self.engine_groups.count)
        shares: list[RolloutShare] = self.group.exchange(lambda: self._roll_out_share(slots, mine, step), f"step {step}")
        # The whole batch on every rank, in one order: the same advantages, learner batches and retry buffers.
        rollouts = sorted((r for share in shares for r in share.rollouts),
                          key=lambda r: (r.slot_index, r.generation.sample_index))
        self.publisher.align(max(share.next_event_number for share in shares))
        self._verifier_cache_counts = (sum(s.verifier_cache_hits for s in shares),
                                       sum(s.verifier_cache_misses for s in shares))
        # The step waits for the slowest rank.
        return (rollouts, max(share.generation_s for share in shares),
                max(share.verification_tail_s for share in shares))

    def learner_step(self, sequences) -> dict:
        return combine_learner_metrics(self.group.all_gather(self.learner.step(sequences)))

    def step_token_records(self) -> list:
        # A collective: every rank sends its share as flat arrays, rank 0 (which writes them) gets them all.
        return self.group.gather_token_records(self.learner.token_records)

    def _roll_out_share(self, slots, mine: list[int], step: int) -> RolloutShare:
        rollouts, generation_s, tail_s = self.roll_out_and_verify(slots, step, mine)
        self.check_verifier_still_reachable(rollouts)
        stats = self.verifier.stats() if self.verifier is not None else {}
        return RolloutShare(rollouts, generation_s, tail_s, stats.get("cache_hits", 0), stats.get("cache_misses", 0),
                            self.publisher.next_number)

    def sampling_settings(self, step: int):
        settings = super().sampling_settings(step)
        # Each engine its own random stream: two engines given the same problem must not write the same
        # answers, while the shards of one engine must sample exactly alike.
        return replace(settings, seed=settings.seed + self.engine_index * SAMPLING_SEED_STRIDE)

    def tool_session(self, headers, sampling):
        # Refused at start-up (check_world_fits_config); kept so that no path around it pauses one rank alone.
        problem = lean_tool_calls_problem(self.config, self.group.world_size)
        if problem:
            raise ValueError(problem)
        # Fed by a rollout pool, rank 0's evaluations go to the pool too, whose processes pause the answers and send
        # their snippets back to rank 0's verifier.
        return super().tool_session(headers, sampling)

    def scores_here(self, generation, samples_per_prompt: int) -> bool:
        return self.engine_groups.scores(self.group.rank, generation.prompt_index, generation.sample_index,
                                         samples_per_prompt)

    def step_metrics(self, rollouts, learner_metrics, retry_counts, timings) -> dict:
        metrics = super().step_metrics(rollouts, learner_metrics, retry_counts, timings)
        if "verifier/cache_hit_rate" in metrics and not self.is_asynchronous:  # fed by a pool, rank 0 scored all
            hits, misses = self._verifier_cache_counts
            metrics["verifier/cache_hit_rate"] = hits / (hits + misses) if hits + misses else 0.0
        return metrics

    # --- evaluation and checkpoints ------------------------------------------------------------------

    @property
    def evaluation_share(self) -> str | None:
        # Each engine's problems are its own slots 0, 1, …: its name keeps their samples' keys apart.
        return f"e{self.engine_index}" if self.engine_groups.count > 1 and not self.is_asynchronous else None

    def evaluation_outcomes(self, step: int, seed: int | None = None,
                            show_progress: bool = False) -> tuple[dict, dict, dict]:
        """Each engine evaluates every engines-th problem, and every rank gets all of them (rank 0 publishes).

        The ranks of one engine return the same outcomes (``_score_all`` pools their scoring), so
        merging them by problem id counts each problem once.
        """
        if self.is_asynchronous:
            return self._pool_evaluation_outcomes(step, seed, show_progress)
        mine = self.eval_problems[self.engine_index :: self.engine_groups.count]

        def my_share():
            first, chains = self.evaluation_rewards(mine, step, seed, show_progress)
            return first, chains, self.standin_verdicts_by_problem()

        merged: tuple[dict, dict, dict] = ({}, {}, {})
        for share in self.group.exchange(my_share, f"evaluation at step {step}"):
            for gathered, part in zip(merged, share):
                gathered.update(part)
        return merged

    def _pool_evaluation_outcomes(self, step: int, seed: int | None, show_progress: bool) -> tuple[dict, dict, dict]:
        """Fed by a rollout pool, rank 0 evaluates every problem on the pool and hands the outcomes to every rank."""
        def rank_zeros_outcomes():
            if self.group.rank != 0:
                return None
            first, chains = self.evaluation_rewards(self.eval_problems, step, seed, show_progress)
            return first, chains, self.standin_verdicts_by_problem()

        return self.group.exchange(rank_zeros_outcomes, f"evaluation at step {step}")[0]

    def _score_all(self, slots, sampling, key_prefix, progress_description: str | None = None, *,
                   step: int = 0) -> dict:
        """Every answer of this engine's call, scored: this rank's share, pooled with its engine's other ranks.

        The ranks of an engine must build the same retry prompts from these verdicts (they generate
        the retries together), so each needs all of them; each is scored once, on one rank.
        """
        if self.engine_peers is None:
            return super()._score_all(slots, sampling, key_prefix, progress_description, step=step)
        shares = self.engine_peers.exchange(
            lambda: super(DataParallelRun, self)._score_all(slots, sampling, key_prefix, progress_description,
                                                            step=step),
            f"evaluation at step {self.step}")
        return {where: scored for share in shares for where, scored in share.items()}

    def save_checkpoint(self):
        folder = super().save_checkpoint()  # every rank gathers the full weights, rank 0 writes
        self.group.barrier()  # no rank runs ahead, or exits, before the checkpoint is in place
        return folder

    def _next_event_seq(self) -> int:
        # A resumed run must number its events after every rank's, not only after rank 0's.
        self._align_event_numbers()
        return self.publisher.seq_of(self.publisher.next_number, rank=0)

    def _align_event_numbers(self) -> None:
        self.publisher.align(self.group.max_int(self.publisher.next_number))


def run_data_parallel(config: RunConfig, problems, output_dir, publisher: RankEventPublisher,
                      position: RankPosition, **options) -> RunStatus:
    """One learner rank of ``python -m trainer run`` (a driver's rank actor): join the ranks, train, and leave the group
    cleanly."""
    try:
        group = RankGroup.join(position)
    except Exception as error:  # noqa: BLE001 - a run that cannot start must still say why
        reason = f"cannot join the {position.world_size} training ranks: {type(error).__name__}: {error}"
        publisher.publish(EventType.ERROR, {"step": 0, "message": reason})
        publisher.publish(EventType.RUN_FINISHED, {"status": RunStatus.FAILED.value, "reason": reason, "step": 0})
        return RunStatus.FAILED
    status = DataParallelRun(config, problems, output_dir, publisher, group=group, **options).run()
    if status is RunStatus.SUCCEEDED:
        # Only after success: with a peer gone, tearing the group down could wait on it.
        dist.destroy_process_group()
    return status


__all__ = [
    "DataParallelRun", "PeerFailureWatch", "PeerRankFailed", "RankEventPublisher", "RankGroup", "RolloutShare",
    "build_rank_engine", "combine_learner_metrics", "run_data_parallel",
]
