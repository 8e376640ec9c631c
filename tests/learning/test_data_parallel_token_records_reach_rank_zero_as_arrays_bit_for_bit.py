"""A data-parallel step's token records reach rank 0 as flat arrays (a byte buffer of columns, keys and advantages
beside), not as pickled objects, and rank 0 reassembles every rank's records bit for bit: every column, every value,
NaN and −0.0 included, a record without engine log-probabilities and a rank with no records at all.

Real ranks: three processes in a gloo group, as torchrun starts a CPU run's (trainer/loop/distributed.py RankGroup)."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.distributed as dist

from deploy.services import free_port
from trainer.observability import packed_token_records, token_records
from trainer.ranks import RankPosition

WORLD_SIZE = 3
COLUMNS = ("token_ids", "engine_logprobs", "learner_logprobs", "entropies", "loss_weights", "flags")


def rank_records(rank: int) -> list[token_records.TokenRecord]:
    """What the learner of ``rank`` holds: its types (ids and engine log-probs as Python lists, the rest numpy)."""
    if rank == 2:
        return []  # a rank whose share held no trained sequence
    rng = np.random.default_rng(rank)
    records = []
    for index, length in enumerate((5, 1, 300)[: 2 + rank]):
        learner = (-rng.exponential(0.7, length)).astype(np.float32)
        learner[0] = -0.0
        engine = [float(value) for value in learner.astype(np.float64) + rng.normal(0, 1e-3, length)]
        engine[-1] = float("nan")
        records.append(token_records.TokenRecord(
            rollout_key=f"a1-s3-p{rank}-r{index}", advantage=float(rng.normal()) / 3,
            token_ids=[int(value) for value in rng.integers(0, 151_000, length)],
            engine_logprobs=None if index == 1 else engine, learner_logprobs=learner,
            entropies=rng.gamma(2.0, 0.5, length).astype(np.float32),
            loss_weights=np.where(rng.random(length) < 0.3, 0.0, rng.random(length)).astype(np.float32),
            flags=rng.integers(0, 32, length).astype(np.uint8)))
    return records


def one_rank(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    from trainer.loop.distributed import RankGroup

    group = RankGroup.join(RankPosition(rank, WORLD_SIZE, rank))
    gathered = group.gather_token_records(rank_records(rank))
    (Path(folder) / f"rank{rank}.pickle").write_bytes(pickle.dumps(gathered))
    dist.destroy_process_group()


def bits(values) -> bytes:
    array = np.asarray(values)
    return array.dtype.str.encode() + array.tobytes()


@pytest.fixture(scope="module")
def gathered_by_rank(tmp_path_factory) -> dict[int, list]:
    folder = tmp_path_factory.mktemp("ranks")
    torch.multiprocessing.spawn(one_rank, args=(free_port(), str(folder)), nprocs=WORLD_SIZE, join=True)
    return {rank: pickle.loads((folder / f"rank{rank}.pickle").read_bytes()) for rank in range(WORLD_SIZE)}


def test_rank_zero_holds_every_ranks_records_in_rank_order_bit_for_bit(gathered_by_rank):
    gathered = gathered_by_rank[0]
    expected = [record for rank in range(WORLD_SIZE) for record in rank_records(rank)]
    assert [record.rollout_key for record in gathered] == [record.rollout_key for record in expected]
    for received, sent in zip(gathered, expected):
        assert received.advantage == sent.advantage
        for column in COLUMNS:
            if getattr(sent, column) is None:
                assert getattr(received, column) is None, (sent.rollout_key, column)
                continue
            wire_dtype = dict(packed_token_records.PACKED_COLUMNS)[column]
            assert bits(getattr(received, column)) == bits(np.asarray(getattr(sent, column), dtype=wire_dtype)), (
                sent.rollout_key, column)
        assert np.asarray(sent.learner_logprobs).dtype == np.asarray(received.learner_logprobs).dtype  # float32 stays


def test_the_other_ranks_hold_nothing_they_never_read(gathered_by_rank):
    assert gathered_by_rank[1] == [] and gathered_by_rank[2] == []


def test_packed_records_are_columns_and_offsets_not_objects():
    records = rank_records(1)
    packed = packed_token_records.pack_records(records)
    assert packed.buffer.dtype == np.uint8 and packed.buffer.size == packed_token_records.packed_size(packed.lengths)
    assert packed.lengths.tolist() == [5, 1, 300]
    unpacked = packed_token_records.unpack_records(packed)
    assert [bits(r.learner_logprobs) for r in unpacked] == [bits(r.learner_logprobs) for r in records]
