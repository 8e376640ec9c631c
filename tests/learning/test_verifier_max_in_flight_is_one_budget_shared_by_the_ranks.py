"""verifier.max_in_flight is the run's budget, as the deploy guide sizes the Lean server by it: the ranks
that score share it, so 8 ranks at 64 keep 64 proofs in flight, not 512."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from deploy.services import free_port
from tests.learning.conftest import tiny_run_config
from trainer.ranks import in_flight_share
from trainer.verification.standin_server import StandinServerThread


@pytest.mark.parametrize(("budget", "ranks", "shares"), [
    (64, 8, [8] * 8),
    (10, 4, [3, 3, 2, 2]),
    (3, 4, [1, 1, 1, 1]),  # below one per rank: each keeps one
    (64, 1, [64]),
])
def test_the_budget_splits_evenly_over_the_scoring_ranks(budget, ranks, shares):
    assert [in_flight_share(budget, ranks, rank) for rank in range(ranks)] == shares


def one_rank(rank: int, port: int, folder: str, verifier_url: str) -> None:
    """A real data-parallel rank of a run with verifier.max_in_flight 5: its Lean client, as it starts."""
    from trainer.learning.models import smollm2_tokenizer, tiny_random_policy
    from trainer.loop.distributed import DataParallelRun, RankEventPublisher, RankGroup
    from trainer.observability.events import ListSink
    from trainer.ranks import RankPosition
    from trainer.recipe.problems import Problem

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE="2", RANK=str(rank))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    group = RankGroup.join(RankPosition(rank, 2, rank))
    config = tiny_run_config(cluster={"num_gpus": 2}, verifier={"url": verifier_url, "max_in_flight": 5})
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer()))
    run = DataParallelRun(config, [Problem("p", "theorem p : (1 : ℕ) = 1 := by")], Path(folder) / "out",
                          RankEventPublisher("budget", ListSink(), 0, rank=rank, world_size=2), group=group,
                          model=model, tokenizer=tokenizer, install_signal_handlers=False)
    run._start_rollouts_and_scoring()
    try:
        (Path(folder) / f"rank{rank}.json").write_text(json.dumps(run.verifier.config.max_in_flight))
    finally:
        run.tear_down()
    dist.destroy_process_group()


def test_two_ranks_of_a_run_with_five_in_flight_hold_three_and_two(tmp_path):
    with StandinServerThread() as server:
        torch.multiprocessing.spawn(one_rank, args=(free_port(), str(tmp_path), server.url), nprocs=2, join=True)
    assert [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in range(2)] == [3, 2]
