"""A learner rank as a Ray actor: one process per rank, placed in its bundle of the run's placement group.

The driver (trainer/loop/ray_driver.py) starts one ``LearnerRank`` per learner rank and hands each the
rendezvous torchrun used to hand it: MASTER_ADDR and MASTER_PORT (learner rank 0's node and a free port
there), RANK, WORLD_SIZE and LOCAL_RANK. The rank then runs the same code a torchrun rank ran
(trainer/loop/distributed.py), unchanged: its process group, its failure record, its events.

What differs from a torchrun rank, and how it is met here:

- **Its events go to the driver**, not to a sink of its own (``ForwardedEvents``): the driver writes them to
  the run's stdout or Redis stream, and holds a rank's end (ERROR, RUN_FINISHED) until it knows whether a
  node died under the run, which then is the run's end, said once.
- **Cancel is a call, not a signal.** Ray's job stop sends SIGTERM to the driver's processes only; a rank
  actor is a worker process of a raylet, on any node. The driver calls ``cancel`` (a concurrency group of its
  own, so it runs while ``run`` is busy), which cancels the run as SIGTERM does (``RunLifecycle.request_cancel``:
  the stop deadline, then RunCancelled in the running thread), and ``ray.kill`` follows after
  RAY_JOB_STOP_WAIT_TIME_S, as Ray's SIGKILL follows its SIGTERM.
- **Its standard output is its standard error**: the driver's standard output carries the run's events, one
  JSON object a line, and Ray forwards a worker's output to its driver.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import ray

from trainer.command_line import EXIT_CANCELLED, CommandError
from trainer.ranks import cpu_stands_in_for_gpus, torchrun_position
from trainer.run.lifecycle import request_cancel_of_running_run

CONTROL = "control"  # the concurrency group of the calls that must run while ``run`` is busy


class ForwardedEvents:
    """A rank's event sink: each event to the driver's inbox (a ``ray.util.queue.Queue``), as one JSON line."""

    def __init__(self, inbox):
        self.inbox = inbox

    def write(self, event) -> None:
        self.inbox.put(event.model_dump_json())


@ray.remote(concurrency_groups={CONTROL: 1})
class LearnerRank:
    """One learner rank of a run; the driver gives it its bundle and environment (``LearnerRank.options``)."""

    def __init__(self, rank: int):
        self.rank = rank
        self._cancel_requested = threading.Event()

    def where(self) -> dict[str, Any]:
        """This actor's node and process, for the driver's placement event and its reading of a death."""
        context = ray.get_runtime_context()
        return {"node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid()}

    def free_port(self) -> int:
        """A port free on this node now, for the rank group's rendezvous (learner rank 0's store listens on it)."""
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("", 0))
            return probe.getsockname()[1]

    def run(self, body: Callable, args, rendezvous: dict[str, str], inbox) -> int:
        """Run the rank as ``python -m trainer run`` under torchrun ran it: ``body(args, sink, position)``; its exit code."""
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # also what C code prints: the driver's stdout is events
        sys.stdout = sys.stderr
        os.environ.update(rendezvous)
        if cpu_stands_in_for_gpus():
            # Ray numbers the logical GPUs it granted; on the CPU they name no device, so the rank must not read
            # them as devices of its own.
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        if self._cancel_requested.is_set():
            return EXIT_CANCELLED
        try:
            return body(args, ForwardedEvents(inbox), torchrun_position())
        except CommandError as error:
            print(f"trainer run (learner rank {self.rank}): {error}", file=sys.stderr, flush=True)
            return error.exit_code

    @ray.method(concurrency_group=CONTROL)
    def cancel(self) -> bool:
        """Cancel the run as Ray's SIGTERM cancels a process; whether a run was running to hear it."""
        self._cancel_requested.set()
        return request_cancel_of_running_run("SIGTERM")
