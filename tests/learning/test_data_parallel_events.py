"""What the ranks of a data-parallel run publish, how they number it, and how rank 0 learns of a peer's failure."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from deploy.services import free_port
from trainer.loop.distributed import (
    PeerFailureWatch,
    PeerRankFailed,
    RankEventPublisher,
    RankGroup,
    combine_learner_metrics,
)
from trainer.observability.events import EventType, ListSink
from trainer.ranks import EngineGroups, RankPosition


def publisher(rank: int, first_seq: int = 0, world_size: int = 4) -> tuple[RankEventPublisher, ListSink]:
    sink = ListSink()
    return RankEventPublisher("r", sink, first_seq, rank=rank, world_size=world_size), sink


def test_ranks_number_their_events_apart_so_no_two_share_a_seq():
    rank0, sink0 = publisher(0, first_seq=100)
    rank3, sink3 = publisher(3, first_seq=100)
    for _ in range(3):
        rank0.publish(EventType.ROLLOUT_FINISHED, {})
        rank3.publish(EventType.ROLLOUT_FINISHED, {})
    assert [e.seq for e in sink0.events] == [100, 104, 108]
    assert [e.seq for e in sink3.events] == [103, 107, 111]


def test_a_rank_other_than_zero_publishes_only_its_rollouts():
    rank1, sink = publisher(1)
    for type in (EventType.STEP_STARTED, EventType.METRICS, EventType.LOG, EventType.ROLLOUT_FINISHED):
        rank1.publish(type, {})
    assert [e.type for e in sink.events] == [EventType.ROLLOUT_FINISHED]


def test_aligning_moves_numbering_forward_only():
    rank2, sink = publisher(2)
    rank2.publish(EventType.ROLLOUT_FINISHED, {})
    rank2.align(10)
    rank2.align(3)
    rank2.publish(EventType.ROLLOUT_FINISHED, {})
    assert [e.seq for e in sink.events] == [2, 42]


def test_nothing_is_published_after_the_run_finished():
    rank0, sink = publisher(0)
    assert rank0.publish(EventType.RUN_FINISHED, {"status": "failed"}) is not None
    assert rank0.publish(EventType.RUN_FINISHED, {"status": "succeeded"}) is None
    assert rank0.publish(EventType.LOG, {}) is None
    assert [e.payload["status"] for e in sink.events] == ["failed"]


@pytest.fixture
def shared_store():
    return dist.HashStore()


def test_the_first_recorded_failure_is_the_one_every_rank_reads(shared_store):
    ranks = [RankGroup(rank, 3, store=shared_store) for rank in range(3)]
    assert ranks[0].first_failure() is None
    ranks[2].record_failure("failed during step 4: ValueError: bad")
    ranks[0].record_failure("failed during step 4: RuntimeError: Connection closed by peer")
    assert ranks[0].first_failure() == (2, "failed during step 4: ValueError: bad")
    assert ranks[1].first_failure() == (2, "failed during step 4: ValueError: bad")


def test_rank_zero_stuck_after_a_peer_failed_publishes_the_failure_and_ends_itself(shared_store):
    rank0, sink = publisher(0, world_size=2)
    exits = []
    RankGroup(1, 2, store=shared_store).record_failure("failed during step 3: RuntimeError: CUDA out of memory")
    with PeerFailureWatch(RankGroup(0, 2, store=shared_store), rank0, lambda: 3, grace_s=0.05, poll_s=0.01,
                          exit_process=exits.append):
        for _ in range(500):
            if exits:
                break
            time.sleep(0.01)
    assert exits == [1]
    reason = "rank 1 failed during step 3: RuntimeError: CUDA out of memory"
    assert [(e.type, e.payload.get("message") or e.payload.get("reason")) for e in sink.events] == [
        (EventType.ERROR, reason), (EventType.RUN_FINISHED, reason),
    ]


def test_the_watch_leaves_a_run_that_finishes_by_itself_within_the_grace_alone(shared_store):
    rank0, sink = publisher(0, world_size=2)
    exits = []
    RankGroup(1, 2, store=shared_store).record_failure("failed during step 1: RuntimeError: boom")
    with PeerFailureWatch(RankGroup(0, 2, store=shared_store), rank0, lambda: 1, grace_s=30, poll_s=0.01,
                          exit_process=exits.append):
        rank0.publish(EventType.RUN_FINISHED, {"status": "failed", "reason": "rank 1 failed during step 1: boom"})
    assert exits == [] and len(sink.events) == 1


def test_learner_metrics_of_the_ranks_combine_into_the_whole_batchs():
    # Each rank's loss is its half of the batch's, scaled by the 2 ranks; 10 + 30 tokens, 1 + 6 clipped low.
    rank0 = {"loss": 0.2, "grad_norm": 1.5, "tokens": 10, "trained_sequences": 2, "seconds": 1.0,
             "clip_low_tokens": 1, "clip_high_tokens": 0, "dual_clip_tokens": 0}
    rank1 = {"loss": 0.6, "grad_norm": 1.5, "tokens": 30, "trained_sequences": 3, "seconds": 2.0,
             "clip_low_tokens": 6, "clip_high_tokens": 3, "dual_clip_tokens": 0}
    combined = combine_learner_metrics([rank0, rank1])
    assert combined["loss"] == pytest.approx(0.4)
    assert combined["grad_norm"] == 1.5
    assert (combined["tokens"], combined["trained_sequences"]) == (40, 5)
    assert combined["clip_low_fraction"] == pytest.approx(7 / 40)
    assert combined["clip_fraction"] == pytest.approx(10 / 40)
    assert combined["tokens_per_second"] == pytest.approx(20.0)


def test_a_step_no_rank_trained_a_token_in_measures_no_rate_and_no_clip_fraction():
    # Every advantage 0 (all answers equally wrong): nothing was trained, so nothing was measured.
    idle = {"loss": 0.0, "grad_norm": 0.0, "tokens": 0, "trained_sequences": 0, "seconds": 0.5,
            "clip_low_tokens": 0, "clip_high_tokens": 0, "dual_clip_tokens": 0}
    combined = combine_learner_metrics([idle, dict(idle)])
    assert combined["tokens_per_second"] is None
    assert combined["clip_fraction"] is None and combined["clip_low_fraction"] is None


def exchange_within_engines(rank: int, port: int, folder: str) -> None:
    """One of 4 ranks in engines of 2 ({0, 1} and {2, 3}) exchanging within its engine, where rank 3 fails."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=4)
    engines = EngineGroups(world_size=4, tensor_parallel_size=2)
    peers = RankGroup.join(RankPosition(rank, 4, rank)).join_engine_peers(engines)

    def share() -> int:
        if rank == 3:
            raise RuntimeError("the Lean client lost its connection")
        return rank

    try:
        outcome = ["shares", peers.exchange(share, "scoring")]
    except PeerRankFailed as error:
        outcome = ["peer failed", error.rank, error.reason]
    except RuntimeError as error:
        outcome = ["own error", str(error)]
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(outcome))
    dist.destroy_process_group()


def test_a_failure_exchanged_within_an_engine_names_the_run_rank_that_failed(tmp_path):
    # Within engine 1 rank 3 is the group's second member: its peer must hear "rank 3", not "rank 1".
    torch.multiprocessing.spawn(exchange_within_engines, args=(free_port(), str(tmp_path)), nprocs=4, join=True)
    assert [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(4)] == [
        ["shares", [0, 1]],
        ["shares", [0, 1]],
        ["peer failed", 3, "failed during scoring: RuntimeError: the Lean client lost its connection"],
        ["own error", "the Lean client lost its connection"],
    ]
