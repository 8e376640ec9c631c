"""torchrun passes a cancel (Ray's SIGTERM) to every rank; the rank that leaves first breaks its peers' collectives.
A rank whose collective broke because a peer was cancelled reports the cancel, not a failure (trainer/loop/distributed.py
``DataParallelRun.outcome_of``). The ranks' record is torch's own in-memory store, as torchrun's is a TCP one."""

from __future__ import annotations

import torch.distributed as dist

from trainer.loop.distributed import DataParallelRun, RankGroup
from trainer.observability.events import RunStatus
from trainer.run.lifecycle import RunCancelled


def rank(number: int, store, step: int = 2) -> DataParallelRun:
    run = object.__new__(DataParallelRun)  # only what outcome_of reads: the rank group and the step
    run.group, run.step = RankGroup(number, 2, store=store), step
    return run


BROKEN_COLLECTIVE = RuntimeError("[gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:2750")


def test_a_broken_collective_after_a_peer_was_cancelled_is_a_cancel():
    store = dist.HashStore()
    assert rank(1, store).outcome_of(RunCancelled("SIGTERM")) == (RunStatus.CANCELLED, "stopped by SIGTERM during step 2")
    assert rank(0, store).outcome_of(BROKEN_COLLECTIVE) == (
        RunStatus.CANCELLED, "stopped by SIGTERM during step 2 (rank 1 first)")


def test_a_broken_collective_with_no_cancel_on_record_is_a_failure():
    status, reason = rank(0, dist.HashStore()).outcome_of(BROKEN_COLLECTIVE)
    assert status is RunStatus.FAILED and "Connection closed by peer" in reason
