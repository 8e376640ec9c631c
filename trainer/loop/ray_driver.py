"""The run's driver: ``python -m trainer run`` as a Ray job's entrypoint, holding no GPU, its actors placed.

For a run of several learner ranks or with a rollout pool, the command is this driver (no ``torchrun`` in front
of it). The cast:

- **the placement group** ``run-<run id>-attempt-<n>``: the run's bundles, by the one placement rule
  (trainer/cluster/placement.py), reserved all at once; while Ray cannot grant it the driver publishes a
  PLACEMENT event "waiting" (what the run wants, each node's free GPUs and CPUs), again every ~30 s;
- **one learner-rank actor per rank** (trainer/loop/rank_actor.py), each in its bundle, rendezvousing across
  nodes: learner rank 0's node address and a port free there are handed to every rank with RANK, WORLD_SIZE
  and LOCAL_RANK, and TRAINER_PLACEMENT_GROUP names the group (learner rank 0 places the rollout engines in
  it); once all are up, a PLACEMENT event "placed" says who sits on which node;
- **an inbox** (a ``ray.util.queue.Queue`` on the driver's node): the ranks' events, which the driver writes to
  the run's sink (stdout or Redis) in the order they come.

How an attempt ends, said once, by the driver:

- a rank's ``run`` returns: its process is ended (``ray.kill``) as a torchrun rank's ended, so a peer waiting
  in a collective with it sees it gone, as before; learner rank 0's end (ERROR, RUN_FINISHED) is the run's;
- a rank actor dies under the run (``RayActorError``: its node removed or lost, its worker killed from
  outside): the attempt fails, "node <id> (<ip>) died: learner rank 1 was lost", with cause
  ``infrastructure`` (trainer/cluster/failures.py), so the platform starts the next attempt from the last
  checkpoint. What learner rank 0 said of it meanwhile (a broken collective) is the echo, held back;
- SIGTERM (Ray's job stop) or SIGINT: while the group waits, the group is removed and the run ends cancelled
  at once; once placed, every rank is asked to cancel (``LearnerRank.cancel``) and what has not ended within
  its stop deadline is killed, before Ray's own SIGKILL of the driver.

Whatever the end, every actor of the run is killed and its placement group removed: no actor outlives its run.

Outside a Ray job (no RAY_ADDRESS), the driver starts a local Ray of its own (``address="local"``); with CPU
processes standing in for GPUs (trainer/ranks.py ``CPU_STANDS_IN_FOR_GPUS``) it declares the run's GPUs as logical
ones there, as the tests' clusters do.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from trainer.cluster.failures import CAUSE_INFRASTRUCTURE
from trainer.cluster.placement import PLACEMENT_GROUP_VARIABLE, RunPlacement, run_placement
from trainer.command_line import EXIT_CANCELLED, EXIT_FAILED
from trainer.config import RunConfig
from trainer.observability.events import EventPublisher, EventType, Placement, RunStatus, StdoutSink, TrainerEvent
from trainer.ranks import cpu_stands_in_for_gpus
from trainer.run.checkpoint import record_last_event_seq
from trainer.run.lifecycle import STOP_WAIT_VARIABLE, is_rays_sigterm_exit, stop_deadline_s

WAITING_NOTICE_S = 3.0  # a placement group not granted by then is waiting for resources: say so
WAITING_REPEAT_S = 30.0  # and again this often, with fresh numbers
POLL_S = 0.5
# After learner rank 0 has ended, how long a peer's death may still take to reach the driver: a broken
# collective reaches rank 0 in milliseconds, Ray's word that the peer's node died takes longer.
PEER_DEATH_GRACE_S = 10.0
# After a rank died on a node that is still up (its worker killed from outside), how long learner rank 0 may take to
# end by itself, naming how (trainer/loop/distributed.py PeerExitWatch): until its next exchange with the dead rank,
# or its own watch's grace for a collective that will never complete (PEER_FAILURE_GRACE_S, 30 s).
RANK_ZERO_GRACE_S = 40.0
# What a rank actor inherits from the driver's environment besides what its job gives every worker (on a
# cluster, the job's runtime_env): the trainer's own settings, the caches, the tokenizer's threads.
FORWARDED_VARIABLE_PREFIXES = ("TRAINER_", "LEANRL_", "LEAN_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "VLLM_",
                               "OMP_", "MKL_", "WANDB_", "MLFLOW_", "TORCH", "PYTHONHASHSEED", STOP_WAIT_VARIABLE)
_END_TYPES = (EventType.ERROR, EventType.RUN_FINISHED)


def placement_group_name(run_id: str, attempt: int) -> str:
    return f"run-{run_id}-attempt-{attempt}"


@dataclass
class _Cast:
    """The run's actors, where each sits, and how each ended."""

    actors: dict[int, object] = field(default_factory=dict)  # learner rank -> actor handle
    where: dict[int, dict] = field(default_factory=dict)  # learner rank -> {"node_id", "node_ip", "pid"}
    exit_codes: dict[int, int] = field(default_factory=dict)
    lost: tuple[int, BaseException] | None = None  # the first rank that died under the run, and Ray's error
    is_lost_node_alive: bool = False  # whether that rank's node was still up once its death was known


class _Inbox:
    """The ranks' events, written to the run's sink by a thread of the driver; the end held for the driver."""

    def __init__(self, queue, sink):
        self.queue = queue
        self.sink = sink
        self.held_end: list[TrainerEvent] = []
        self.last_seq = -1
        self.step = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._forward, name="rank-events", daemon=True)
        self._thread.start()

    def _forward(self) -> None:
        from ray.util.queue import Empty

        while True:
            try:
                lines = self.queue.get_nowait_batch(self.queue.qsize()) if self.queue.qsize() else []
            except Empty:
                lines = []
            except Exception:  # noqa: BLE001 - the queue's actor is gone: the run is ending
                return
            for line in lines:
                self.write(TrainerEvent.model_validate_json(line))
            if not lines:
                if self._stop.is_set():
                    return
                time.sleep(0.05)

    def write(self, event: TrainerEvent) -> None:
        self.last_seq = max(self.last_seq, event.seq)
        if event.type is EventType.STEP_STARTED:
            self.step = int(event.payload.get("step", self.step))
        if event.type in _END_TYPES:
            self.held_end.append(event)  # the driver says how the attempt ended, once it knows
        else:
            self.sink.write(event)

    def drain(self, timeout_s: float = 10.0) -> None:
        """Forward what the queue still holds, then stop."""
        self._stop.set()
        self._thread.join(timeout_s)


def connect_to_ray(placement: RunPlacement) -> None:
    """Join the cluster of RAY_ADDRESS (a Ray job's, or a person's), else start a local Ray of this run's own."""
    import ray

    if ray.is_initialized():
        return
    if os.environ.get("RAY_ADDRESS"):
        ray.init(log_to_driver=True)
        return
    logical_gpus = placement.gpus if cpu_stands_in_for_gpus() else None
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, placement.cpus), num_gpus=logical_gpus,
             include_dashboard=False, log_to_driver=True)


def _keep_stdout_for_events(sink) -> None:
    """Standard output carries the run's events, one JSON object a line; Ray's driver prints its workers' and
    raylets' messages there too ("(raylet) A worker died ..."). The events keep the real standard output; everything
    else written to it, Ray's messages among it, goes to standard error."""
    if not isinstance(sink, StdoutSink) or sink.stream is not sys.stdout:
        return
    sys.stdout.flush()
    sink.stream = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())


def _forwarded_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name.startswith(FORWARDED_VARIABLE_PREFIXES)}


def _free_per_node() -> list[dict]:
    """Each live node's free GPUs and CPUs now (Ray's own accounting, as the autoscaler reads it)."""
    import ray
    from ray._private.state import available_resources_per_node

    nodes = {node["NodeID"]: node for node in ray.nodes() if node.get("Alive")}
    free = available_resources_per_node()
    return [{"node_id": node_id, "node_ip": node.get("NodeManagerAddress", ""),
             "gpus_free": float(free.get(node_id, {}).get("GPU", 0.0)),
             "cpus_free": float(free.get(node_id, {}).get("CPU", 0.0))}
            for node_id, node in sorted(nodes.items())]


def placement_payload(placement: RunPlacement, state: str, *, free_per_node=(), actors=()) -> Placement:
    """A PLACEMENT event's payload: the driver's (waiting, then the learner ranks placed), and learner rank 0's (the
    rollout engines placed, trainer/loop/driver.py); the platform merges the actors lists by name."""
    return Placement(state=state, gpus_wanted=placement.gpus, cpus_wanted=placement.cpus,
                     bundles=[{"role": str(bundle.role), "gpus": bundle.gpus, "cpus": bundle.cpus}
                              for bundle in placement.bundles],
                     free_per_node=list(free_per_node), actors=list(actors))


def _node_is_alive(node_id: str, error: BaseException, settle_s: float = 5.0) -> bool:
    """Whether the node of a rank that died is still up: Ray's own word in the error, else the head's list of
    nodes, given ``settle_s`` to learn of a death the actor's end reached us before."""
    import ray

    if "node has died" in str(error) or "node is dead" in str(error):
        return False
    deadline = time.monotonic() + settle_s
    while True:
        try:
            alive = any(node["NodeID"] == node_id and node.get("Alive") for node in ray.nodes())
        except Exception:  # noqa: BLE001 - the head cannot say: name the loss without claiming the node is up
            return False
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


def lost_rank_reason(rank: int, where: dict | None, error: BaseException, node_is_alive: bool) -> str:
    """What the attempt's end says of a learner rank that died under it."""
    if not where:
        return f"learner rank {rank} was lost before it said where it runs: {_first_line(error)}"
    node = f"node {where['node_id']} ({where['node_ip']})"
    if not node_is_alive:
        return f"{node} died: learner rank {rank} was lost"
    return (f"learner rank {rank} on {node} was lost, its node still up (its worker killed from outside, or "
            f"preempted): {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:300]


class _StopRequest:
    """SIGTERM (Ray's job stop) or SIGINT (Ctrl-C) to the driver, heard between its polls."""

    def __init__(self):
        self.signal_name: str | None = None
        self._previous = {}

    def __enter__(self) -> _StopRequest:
        return self.listen()

    def listen(self) -> _StopRequest:
        """Hear the signals from now on (again after ray.init, which puts its own SIGTERM handler in place)."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                previous = signal.signal(signum, self._heard)
                self._previous.setdefault(signum, previous)
        return self

    def _heard(self, signum, frame) -> None:
        self.signal_name = self.signal_name or ("SIGINT (Ctrl-C)" if signum == signal.SIGINT else "SIGTERM")

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


class RunDriver:
    """One attempt of a run placed as actors, from its placement group to its end."""

    def __init__(self, args, config: RunConfig, sink, publisher: EventPublisher, rank_body: Callable,
                 first_seq: int = 0):
        self.args = args
        self._next_seq = first_seq  # the number the driver's next event takes
        self.config = config
        self.sink = sink
        self.publisher = publisher
        self.rank_body = rank_body
        self.placement = run_placement(config)
        self.name = placement_group_name(args.run_id, args.attempt)
        self.cast = _Cast()
        self.group = None
        self.inbox: _Inbox | None = None
        self._inbox_queue = None

    def _publish(self, type: EventType, payload) -> None:
        self._next_seq = self.publisher.publish(type, payload).seq + 1

    def run(self) -> int:
        import ray

        _keep_stdout_for_events(self.sink)
        with _StopRequest() as stop:
            try:
                connect_to_ray(self.placement)
                stop.listen()
                return self._live(stop)
            except SystemExit as error:
                if not is_rays_sigterm_exit(error):
                    raise
                return self._end(RunStatus.CANCELLED, "stopped by SIGTERM while it connected to Ray", step=0)
            finally:
                self._tear_down()
                ray.shutdown()

    def _live(self, stop: _StopRequest) -> int:
        from ray.util.placement_group import placement_group

        self.group = placement_group(self.placement.as_ray(), strategy=self.placement.strategy, name=self.name)
        if not self._wait_for_placement(stop):
            return self._end(RunStatus.CANCELLED, f"stopped by {stop.signal_name} while its placement group "
                                                  f"{self.name} waited for resources", step=0)
        self._start_ranks()
        return self._watch(stop)

    # --- placement ---------------------------------------------------------------------------------

    def _wait_for_placement(self, stop: _StopRequest) -> bool:
        """Whether the group was granted; False when a stop came first."""
        import ray

        ready = self.group.ready()
        started = time.monotonic()
        next_notice = started + WAITING_NOTICE_S
        while not ray.wait([ready], timeout=POLL_S)[0]:
            if stop.signal_name:
                return False
            if time.monotonic() >= next_notice:
                free_per_node = _free_per_node()
                self._publish(EventType.PLACEMENT, placement_payload(
                    self.placement, "waiting", free_per_node=free_per_node))
                free = "; ".join(f"{node['node_ip']} {node['gpus_free']:g} GPUs, {node['cpus_free']:g} CPUs"
                                 for node in free_per_node)
                print(f"trainer run: placement group {self.name} waits for {self.placement.gpus} GPUs and "
                      f"{self.placement.cpus} CPUs (free per node: {free})", file=sys.stderr, flush=True)
                next_notice = time.monotonic() + WAITING_REPEAT_S
        return not stop.signal_name

    def _start_ranks(self) -> None:
        import ray
        from ray.util.queue import Queue
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy, PlacementGroupSchedulingStrategy

        from trainer.loop.rank_actor import LearnerRank

        driver_node = ray.get_runtime_context().get_node_id()
        self._inbox_queue = Queue(actor_options={
            "num_cpus": 0, "scheduling_strategy": NodeAffinitySchedulingStrategy(driver_node, soft=False)})
        self.inbox = _Inbox(self._inbox_queue, self.sink)
        world_size = self.placement.learner_ranks
        environment = _forwarded_environment()
        for rank in range(world_size):
            bundle_index = self.placement.bundle_of_rank(rank)
            bundle = self.placement.bundles[bundle_index]
            ranks_in_bundle = len(bundle.ranks)
            rank_environment = {**environment, "RANK": str(rank), "WORLD_SIZE": str(world_size),
                                # Ray gives each rank its own GPU(s): the first it sees is its own.
                                "LOCAL_RANK": "0", PLACEMENT_GROUP_VARIABLE: self.name}
            self.cast.actors[rank] = LearnerRank.options(
                name=f"{self.name}-learner-rank-{rank}",
                num_gpus=bundle.gpus / ranks_in_bundle, num_cpus=bundle.cpus / ranks_in_bundle,
                scheduling_strategy=PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=bundle_index),
                runtime_env={"env_vars": rank_environment},
            ).remote(rank)
        wheres = ray.get([self.cast.actors[rank].where.remote() for rank in range(world_size)])
        self.cast.where = dict(enumerate(wheres))
        port = ray.get(self.cast.actors[0].free_port.remote())
        rendezvous = {"MASTER_ADDR": self.cast.where[0]["node_ip"], "MASTER_PORT": str(port)}
        self._publish(EventType.PLACEMENT, placement_payload(self.placement, "placed", actors=[
            {"name": f"learner rank {rank}", "node_id": where["node_id"], "node_ip": where["node_ip"],
             "bundle": self.placement.bundle_of_rank(rank)} for rank, where in self.cast.where.items()]))
        # The ranks number their events after the driver's own (trainer/commands/run.py start_publisher).
        self.args.first_event_seq = self._next_seq
        self._runs = {self.cast.actors[rank].run.remote(self.rank_body, self.args, rendezvous, self._inbox_queue): rank
                      for rank in range(world_size)}

    # --- the run -----------------------------------------------------------------------------------

    def _watch(self, stop: _StopRequest) -> int:
        import ray
        from ray.exceptions import RayActorError

        pending = dict(self._runs)
        rank_zero_ended_at: float | None = None
        lost_at: float | None = None
        cancel_asked_at: float | None = None
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=POLL_S)
            for reference in ready:
                rank = pending.pop(reference)
                try:
                    self.cast.exit_codes[rank] = ray.get(reference)
                except RayActorError as error:
                    if cancel_asked_at is None and self.cast.lost is None:
                        self.cast.lost, lost_at = (rank, error), time.monotonic()
                        where = self.cast.where.get(rank)
                        self.cast.is_lost_node_alive = bool(where) and _node_is_alive(where["node_id"], error)
                    continue
                except Exception as error:  # noqa: BLE001 - the rank's body raised past its own end: its reason
                    self.cast.exit_codes[rank] = EXIT_FAILED
                    print(f"trainer run: learner rank {rank} raised {type(error).__name__}: {error}", file=sys.stderr)
                # Ended: its process goes as a torchrun rank's went, so a peer in a collective with it sees it gone.
                ray.kill(self.cast.actors[rank], no_restart=True)
                if rank == 0:
                    rank_zero_ended_at = time.monotonic()
            now = time.monotonic()
            if self.cast.lost is not None:
                # A node gone is the end at once: what the other ranks still do is its echo.
                if not self.cast.is_lost_node_alive or 0 not in pending.values() or now - lost_at > RANK_ZERO_GRACE_S:
                    break
            if rank_zero_ended_at is not None and now - rank_zero_ended_at > PEER_DEATH_GRACE_S:
                break
            if stop.signal_name and cancel_asked_at is None:
                cancel_asked_at = now
                for reference, rank in pending.items():
                    self.cast.actors[rank].cancel.remote()
            if cancel_asked_at is not None and now - cancel_asked_at > stop_deadline_s() + 1.0:
                break  # what has not ended by its deadline is killed (ray.kill below), before Ray's SIGKILL of us
        self._kill_all()
        self.inbox.drain()
        if self.cast.lost is not None:
            rank, error = self.cast.lost
            where = self.cast.where.get(rank)
            node_is_alive = self.cast.is_lost_node_alive
            rank_zero_failed = self._held_status() == RunStatus.FAILED.value
            if node_is_alive and rank_zero_failed:
                # Its node is up: the rank's process was killed from outside, and learner rank 0, on the same host,
                # read how (trainer/loop/distributed.py PeerExitWatch: "rank 1 was killed by signal 9 ...").
                return self._publish_held_end(cause=CAUSE_INFRASTRUCTURE, node=where["node_id"])
            return self._end(RunStatus.FAILED, lost_rank_reason(rank, where, error, node_is_alive),
                             step=self.inbox.step, cause=CAUSE_INFRASTRUCTURE, node=where["node_id"] if where else None)
        if self._held_status() is not None:
            return self._publish_held_end()
        if stop.signal_name:
            return self._end(RunStatus.CANCELLED, f"stopped by {stop.signal_name} during step {self.inbox.step}; "
                                                  "learner rank 0 was killed before it could say so",
                             step=self.inbox.step)
        code = self.cast.exit_codes.get(0)
        return self._end(RunStatus.FAILED, f"learner rank 0 ended (exit code {code}) without publishing the run's "
                                           "end; its log (the driver's standard error) says why", step=self.inbox.step)

    # --- the end -----------------------------------------------------------------------------------

    def _held_status(self) -> str | None:
        """The status of learner rank 0's own end, held by the inbox; None if it published none."""
        finished = [event for event in self.inbox.held_end if event.type is EventType.RUN_FINISHED]
        return finished[-1].payload.get("status") if finished else None

    def _publish_held_end(self, **extra) -> int:
        """Learner rank 0's end is the attempt's: publish it as it was numbered, with ``extra`` on RUN_FINISHED."""
        for event in self.inbox.held_end:
            if event.type is EventType.RUN_FINISHED and extra:
                event = event.model_copy(update={"payload": {**event.payload, **extra}})
            self.sink.write(event)
        self._record_last_seq(self.inbox.last_seq)
        status = self._held_status()
        return {RunStatus.SUCCEEDED.value: 0, RunStatus.CANCELLED.value: EXIT_CANCELLED}.get(status, EXIT_FAILED)

    def _end(self, status: RunStatus, reason: str, *, step: int, **extra) -> int:
        """Publish the attempt's end as the driver sees it (numbered after every rank's event)."""
        extra = {key: value for key, value in extra.items() if value is not None}
        last_seq = self.inbox.last_seq if self.inbox else -1
        publisher = EventPublisher(self.publisher.run_id, self.sink, first_seq=max(last_seq + 1, self._next_seq),
                                   attempt=self.publisher.attempt)
        if status is RunStatus.FAILED:
            publisher.publish(EventType.ERROR, {"step": step, "message": reason})
        finished = publisher.publish(EventType.RUN_FINISHED, {"status": status.value, "reason": reason, "step": step,
                                                              **extra})
        self._record_last_seq(finished.seq)
        print(f"trainer run: {status.value}: {reason}", file=sys.stderr, flush=True)
        return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)

    def _record_last_seq(self, seq: int) -> None:
        record_last_event_seq(Path(self.args.output), seq)

    def _kill_all(self) -> None:
        import ray

        for actor in self.cast.actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _tear_down(self) -> None:
        """No actor outlives its run: every rank, the inbox, the placement group."""
        from ray.util.placement_group import remove_placement_group

        self._kill_all()
        if self.inbox is not None:
            self.inbox.drain(timeout_s=2.0)
        if self._inbox_queue is not None:
            try:
                self._inbox_queue.shutdown(force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self.group is not None:
            try:
                remove_placement_group(self.group)
            except Exception:  # noqa: BLE001 - already removed
                pass


def drive(args, config: RunConfig, sink, publisher: EventPublisher, rank_body: Callable, first_seq: int) -> int:
    """``python -m trainer run`` for a run placed as actors: the attempt's exit code. ``first_seq``: the number of
    ``publisher``'s next event."""
    return RunDriver(args, config, sink, publisher, rank_body, first_seq).run()
