"""The train–inference gap a data-parallel run reports covers every rank's tokens: means weighted by tokens,
the max of the ranks' maxes. Rank 0's share alone would hide a push that missed another rank's engine."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from deploy.services import free_port
from trainer.loop.distributed import RankGroup, combine_learner_metrics
from trainer.observability.gap import train_inference_gap
from trainer.ranks import RankPosition

# (learner log-probabilities, the engine's) per response. Rank 0's engine has the learner's weights; rank 1's
# missed the last push, so its engine's log-probabilities are off by up to 1.5 nats.
SHARES = {
    0: [([-0.50, -1.00, -2.00], [-0.51, -1.00, -2.02])],
    1: [([-0.30, -0.70], [-1.80, -0.70]), ([-2.00, -0.10, -0.40, -1.00, -0.20], [-2.00, -0.10, -0.90, -1.00, -0.20])],
}


def pairs_of(rank: int):
    return [(torch.tensor(learner), engine) for learner, engine in SHARES[rank]]


def learner_metrics(rank: int) -> dict:
    """What Learner.step reports on one rank: its own counts and its share's gap."""
    tokens = sum(len(learner) for learner, _ in SHARES[rank])
    return {"loss": 0.1, "grad_norm": 1.0, "tokens": tokens, "trained_sequences": len(SHARES[rank]), "seconds": 1.0,
            "clip_low_tokens": 0, "clip_high_tokens": 0, "dual_clip_tokens": 0,
            **train_inference_gap(pairs_of(rank))}


def one_rank(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    group = RankGroup.join(RankPosition(rank, 2, rank))
    combined = combine_learner_metrics(group.all_gather(learner_metrics(rank)))
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(combined))
    dist.destroy_process_group()


def test_two_gloo_ranks_report_the_gap_of_the_whole_batch(tmp_path):
    torch.multiprocessing.spawn(one_rank, args=(free_port(), str(tmp_path)), nprocs=2, join=True)
    reported = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)]
    whole_batch = train_inference_gap(pairs_of(0) + pairs_of(1))  # one process scoring every response
    for combined in reported:
        assert combined["logprob_abs_diff_mean"] == pytest.approx(whole_batch["logprob_abs_diff_mean"])
        assert combined["logprob_abs_diff_max"] == pytest.approx(1.5)  # rank 1's missed push, not rank 0's 0.02
        assert combined["ratio_outside_share"] == pytest.approx(whole_batch["ratio_outside_share"])
        assert combined["logprob_diff_tokens"] == 10


def test_ranks_that_measured_no_token_leave_the_gap_unmeasured_not_zero():
    unmeasured = {**learner_metrics(0), **train_inference_gap([])}
    combined = combine_learner_metrics([unmeasured, dict(unmeasured)])
    assert combined["logprob_abs_diff_mean"] is None and combined["logprob_abs_diff_max"] is None
