"""Two data-parallel ranks (gloo, torch.multiprocessing's spawn, as torchrun starts them) each build the real vLLM
on CPU with its ``external_launcher`` executor, sample their own share, and take the learner's weights.

Each rank is an engine of its own (tensor-parallel size 1): vLLM joins torchrun's process group
instead of starting workers, as on GPUs (trainer/rollout/vllm_engine.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from deploy.services import free_port

WORLD_SIZE = 2


def rank_main(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE),
                      LOCAL_RANK=str(rank), VLLM_ENABLE_V1_MULTIPROCESSING="0")
    from transformers import LlamaForCausalLM

    from tests.rollout.conftest import VLLM_CPU_HEAD_DIM, cpu_vllm_config, tiny_llama_config, word_level_tokenizer
    from trainer.learning.batching import TrainingSequence, pad_batch
    from trainer.learning.token_logprobs import response_logprobs
    from trainer.observability.gap import train_inference_gap
    from trainer.rollout.base import SamplingSettings
    from trainer.rollout.vllm_engine import VllmEngine

    torch.distributed.init_process_group("gloo")
    tokenizer = word_level_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(len(tokenizer), head_dim=VLLM_CPU_HEAD_DIM)).eval()
    engine = VllmEngine.from_config(cpu_vllm_config(schedule={"seed": 17}), model, tokenizer)
    share = [[5 + rank, 6, 7], [8, 9 + rank]]  # each rank its own prompts, as the driver deals them
    sampling = SamplingSettings(n=2, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=12, seed=3)
    generations = list(engine.generate(share, sampling))
    sequences = [TrainingSequence(prompt_ids=share[g.prompt_index], response_ids=g.token_ids, advantage=0.0) for g in generations]
    batch = pad_batch(sequences, pad_token_id=0, device=torch.device("cpu"))
    with torch.no_grad():
        learner = batch.per_sequence(response_logprobs(model, batch, 1.0))
    gap_before = train_inference_gap(zip(learner, [g.logprobs for g in generations]))
    greedy_before = [g.token_ids for g in engine.generate([[5, 6, 7]], SamplingSettings.greedy(max_tokens=8))]
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(-1.0)  # other weights, the same on both ranks
    engine.push_weights(model)
    greedy_after = [g.token_ids for g in engine.generate([[5, 6, 7]], SamplingSettings.greedy(max_tokens=8))]
    record = {
        "backend": engine.llm.llm_engine.vllm_config.parallel_config.distributed_executor_backend,
        "seed": engine.llm.llm_engine.vllm_config.model_config.seed,
        "answers": len(generations),
        "gap_max": gap_before["logprob_abs_diff_max"],
        "greedy_before": greedy_before, "greedy_after": greedy_after,
    }
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(record))
    engine.close()  # vLLM's shutdown also ends the process group it joined
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(vllm_cpu, tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("torchrun-vllm")
    torch.multiprocessing.spawn(rank_main, args=(free_port(), str(folder)), nprocs=WORLD_SIZE, join=True)
    return [json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]


def test_each_rank_runs_vllm_through_the_external_launcher_with_a_seed_of_its_own(ranks):
    assert [record["backend"] for record in ranks] == ["external_launcher"] * WORLD_SIZE
    assert [record["seed"] for record in ranks] == [17, 18]


def test_each_rank_samples_its_share_with_the_learners_log_probabilities(ranks):
    for record in ranks:
        assert record["answers"] == 4
        assert record["gap_max"] < 1e-3


def test_a_push_reaches_both_ranks_engines(ranks):
    for record in ranks:
        assert record["greedy_after"] != record["greedy_before"]
    assert ranks[0]["greedy_after"] == ranks[1]["greedy_after"]  # the same weights and prompt: the same greedy answer
