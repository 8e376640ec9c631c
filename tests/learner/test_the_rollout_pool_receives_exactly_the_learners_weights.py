"""The weight broadcast (trainer/weight_broadcast.py), run for real: three processes on gloo, a tiny Llama.

The same code runs on NCCL between GPU pools; here learner rank 0 and the rollout ranks are CPU
processes started by torch.multiprocessing. Each process writes what it ended with to a file;
the test compares them bit for bit.
"""

from __future__ import annotations

import math
import os
import socket
import time
import traceback
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as multiprocessing

from trainer.models import TINY_RANDOM_SHAPE
from trainer.weight_broadcast import ManifestMismatch, WeightBroadcaster, new_broadcast_group, weight_manifest

BUCKET_BYTES = 64 * 1024  # the tiny model's 4-byte embedding (256 KiB) spans four buckets
WORLD_TIMEOUT_S = 240


def tiny_llama(seed: int, vocab_size: int = 1000, layers: int = 2, dtype=torch.float32):
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {**TINY_RANDOM_SHAPE, "num_hidden_layers": layers}
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab_size, tie_word_embeddings=True, **shape)).to(dtype)


def named_weights(model) -> dict[str, torch.Tensor]:
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


# --- the processes ----------------------------------------------------------------------------------------


def _process(rank: int, world_size: int, port: int, scenario: str, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    try:
        SCENARIOS[scenario](rank, Path(folder))
    except Exception:  # noqa: BLE001 - the parent reads the failure from the file
        (Path(folder) / f"rank{rank}.error").write_text(traceback.format_exc())
    finally:
        dist.destroy_process_group()


def _one_learner_two_rollout_ranks(rank: int, folder: Path) -> None:
    """Rank 0 learns; ranks 1 and 2 are the rollout pool, their models seeded differently. Two updates are sent."""
    group = new_broadcast_group(0, [1, 2])
    broadcaster = WeightBroadcaster(group, source_rank=0, bucket_bytes=BUCKET_BYTES)
    model = tiny_llama(seed=0 if rank == 0 else 10 + rank)
    for version in (1, 2):
        if rank == 0:
            with torch.no_grad():  # an update: every parameter moves
                for parameter in model.parameters():
                    parameter.add_(torch.randn_like(parameter) * 0.01)
            report = broadcaster.send(model, version=version)
        else:
            report = broadcaster.receive_into(model)
        torch.save({"weights": named_weights(model), "report": report}, folder / f"rank{rank}-v{version}.pt")


def _two_sharded_learner_ranks_one_rollout_rank_in_bfloat16(rank: int, folder: Path) -> None:
    """Ranks 0-1: the learner under FSDP2 (float32 master weights); rank 2: a bfloat16 rollout model."""
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    from trainer.rollout.weights import iter_full_weights

    learner_group = dist.new_group([0, 1])
    group = new_broadcast_group(0, [2])  # every rank calls new_group, members or not
    broadcaster = WeightBroadcaster(group, source_rank=0, bucket_bytes=BUCKET_BYTES, dtype=torch.bfloat16)
    if rank in (0, 1):
        model = tiny_llama(seed=0)
        mesh = DeviceMesh.from_group(learner_group, "cpu")
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
        report = broadcaster.send(model, version=7)
        full = {name: tensor.clone() for name, tensor in iter_full_weights(model, dtype=torch.bfloat16)}
        if rank == 0:
            torch.save({"weights": full, "report": report}, folder / "learner.pt")
    else:
        model = tiny_llama(seed=5, dtype=torch.bfloat16)
        report = broadcaster.receive_into(model)
        torch.save({"weights": dict(model.named_parameters()), "report": report}, folder / "rollout.pt")


def _rollout_ranks_holding_other_models(rank: int, folder: Path) -> None:
    """Rank 1 holds a bigger vocabulary, rank 2 an extra layer: both refuse, and every rank says why."""
    group = new_broadcast_group(0, [1, 2])
    broadcaster = WeightBroadcaster(group, source_rank=0, bucket_bytes=BUCKET_BYTES)
    model = {0: tiny_llama(0), 1: tiny_llama(1, vocab_size=1001), 2: tiny_llama(2, layers=3)}[rank]
    try:
        broadcaster.send(model) if rank == 0 else broadcaster.receive_into(model)
    except ManifestMismatch as refusal:
        (folder / f"rank{rank}.refusal").write_text(str(refusal))


SCENARIOS = {
    "one_learner_two_rollout_ranks": _one_learner_two_rollout_ranks,
    "fsdp_learner_bfloat16_rollout": _two_sharded_learner_ranks_one_rollout_rank_in_bfloat16,
    "mismatched_models": _rollout_ranks_holding_other_models,
}


def run_world(scenario: str, world_size: int, folder: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = multiprocessing.start_processes(_process, args=(world_size, port, scenario, str(folder)),
                                              nprocs=world_size, join=False, start_method="spawn")
    deadline = time.monotonic() + WORLD_TIMEOUT_S
    try:
        while not context.join(timeout=1.0):  # False until every process has ended, one join at a time
            if time.monotonic() > deadline:
                pytest.fail(f"{scenario}: the processes did not finish in {WORLD_TIMEOUT_S} s (a hung collective)")
    finally:
        for process in context.processes:
            if process.is_alive():
                process.kill()
    errors = sorted(folder.glob("*.error"))
    assert not errors, "\n".join(error.read_text() for error in errors)


# --- the claims --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def two_updates(tmp_path_factory) -> Path:
    """One world of a learner and two rollout ranks, two updates broadcast: its files (started once, ~1 min)."""
    folder = tmp_path_factory.mktemp("two_updates")
    run_world("one_learner_two_rollout_ranks", 3, folder)
    return folder


def test_every_rollout_rank_ends_each_update_with_exactly_the_learners_weights(two_updates):
    tmp_path = two_updates
    for version in (1, 2):
        learner = torch.load(tmp_path / f"rank0-v{version}.pt", weights_only=False)
        for rank in (1, 2):
            rollout = torch.load(tmp_path / f"rank{rank}-v{version}.pt", weights_only=False)
            assert rollout["weights"].keys() == learner["weights"].keys()
            for name, tensor in learner["weights"].items():
                assert torch.equal(rollout["weights"][name], tensor), (rank, version, name)  # bit for bit
            assert rollout["report"].version == version
            assert rollout["report"].bytes == learner["report"].bytes


def test_buckets_are_bounded_and_as_few_as_the_bytes_need(two_updates):
    tmp_path = two_updates
    learner = torch.load(tmp_path / "rank0-v1.pt", weights_only=False)["report"]
    rollout = torch.load(tmp_path / "rank1-v1.pt", weights_only=False)["report"]
    model = tiny_llama(0)
    total = sum(spec.nbytes for spec in weight_manifest(model))
    # Tied embeddings travel once: 1000 × 64 embedding + 2 layers + the final norm, 4 bytes each.
    assert total == 4 * sum(parameter.numel() for parameter in model.parameters())
    assert learner.bytes == rollout.bytes == total
    assert learner.buckets == rollout.buckets == math.ceil(total / BUCKET_BYTES)
    assert learner.largest_bucket_bytes == rollout.largest_bucket_bytes == BUCKET_BYTES
    assert learner.parameters == rollout.parameters == len(list(model.parameters()))


def test_a_sharded_learner_sends_its_gathered_weights_cast_to_the_rollout_dtype(tmp_path):
    run_world("fsdp_learner_bfloat16_rollout", 3, tmp_path)
    learner = torch.load(tmp_path / "learner.pt", weights_only=False)
    rollout = torch.load(tmp_path / "rollout.pt", weights_only=False)
    assert rollout["weights"].keys() == learner["weights"].keys()
    for name, tensor in learner["weights"].items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(rollout["weights"][name], tensor), name
    assert rollout["report"].version == 7
    assert rollout["report"].bytes == 2 * sum(tensor.numel() for tensor in learner["weights"].values())


def test_a_rollout_rank_holding_another_model_fails_every_rank_with_what_differs(tmp_path):
    run_world("mismatched_models", 3, tmp_path)
    refusals = {rank: (tmp_path / f"rank{rank}.refusal").read_text() for rank in (0, 1, 2)}
    assert refusals[0] == refusals[1] == refusals[2]  # the same sentence everywhere: no rank left waiting
    assert refusals[0].startswith("weight broadcast refused by rank 1 of the rollout pool: 1 differ in shape: "
                                  "model.embed_tokens.weight (learner (1000, 64), rollout (1001, 64))")
    assert "build the rollout engine from the run's model" in refusals[0]


def test_a_model_states_what_it_expects_without_gathering_or_memory():
    with torch.device("meta"):
        model = tiny_llama(0)
    manifest = weight_manifest(model, torch.bfloat16)
    assert manifest[0].name == "model.embed_tokens.weight" and manifest[0].shape == (1000, 64)
    assert {spec.dtype for spec in manifest} == {"bfloat16"}
    assert "lm_head.weight" not in {spec.name for spec in manifest}  # tied to the embedding: sent once
