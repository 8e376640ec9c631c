"""Under torchrun every rank builds its vLLM engine with the external launcher, as one shard of its group's.

Four ranks (gloo on CPU, torch.multiprocessing's spawn) build the engine against the stand-in ``vllm``
package (FakeVllm*, tests/rollout/conftest.py) at tensor-parallel size 2, as a data-parallel run's
ranks do at start-up, and each records what it asked of vLLM.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch

from deploy.services import free_port
from tests.rollout.test_vllm_engine_with_a_stand_in import gpu_config
from trainer.ranks import CPU_STANDS_IN_FOR_GPUS, tensor_parallel_problem
from trainer.rollout.vllm_engine import VllmEngine

WORLD_SIZE = 4


def rank_main(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(WORLD_SIZE),
                      LOCAL_RANK=str(rank), VLLM_ENABLE_V1_MULTIPROCESSING="0")
    os.environ.pop(CPU_STANDS_IN_FOR_GPUS, None)  # the stand-in vLLM is vLLM on GPUs (tests/rollout/conftest.py)
    torch.set_num_threads(1)
    from transformers import LlamaForCausalLM

    from tests.rollout.conftest import FakeVllmLLM, fake_vllm_modules, tiny_llama_config, word_level_tokenizer

    sys.modules.update(fake_vllm_modules())
    torch.distributed.init_process_group("gloo")
    tokenizer = word_level_tokenizer()
    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama_config(len(tokenizer))).eval()
    config = gpu_config(rollout={"vllm_tensor_parallel_size": 2}, schedule={"seed": 17},
                        model={"name_or_path": "/models/prover"})
    VllmEngine.from_config(config, model, tokenizer)
    (llm,) = FakeVllmLLM.instances
    try:
        VllmEngine.from_config(gpu_config(rollout={"vllm_tensor_parallel_size": 3}), model, tokenizer)
        refusal = None
    except ValueError as error:
        refusal = str(error)
    record = {
        "kwargs": llm.kwargs,
        "loaded": {name: list(tensor.shape) for name, tensor in llm.model.loaded.items()},
        "refusal": refusal,
        "instances_after_refusal": len(FakeVllmLLM.instances),
    }
    (Path(folder) / f"rank{rank}.json").write_text(json.dumps(record))
    torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    folder = tmp_path_factory.mktemp("torchrun")
    torch.multiprocessing.spawn(rank_main, args=(free_port(), str(folder)), nprocs=WORLD_SIZE, join=True)
    return [json.loads((folder / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]


def test_every_rank_builds_with_the_external_launcher_at_the_configs_tensor_parallel_size(ranks):
    for record in ranks:
        assert record["kwargs"]["distributed_executor_backend"] == "external_launcher"
        assert record["kwargs"]["tensor_parallel_size"] == 2
        assert record["kwargs"]["worker_extension_cls"] == "trainer.rollout.vllm_worker.LearnerWeightsReceiver"


def test_the_ranks_of_one_engine_share_its_seed_and_the_two_engines_do_not(ranks):
    # vLLM's groups are consecutive ranks: {0, 1} and {2, 3}.
    assert [record["kwargs"]["seed"] for record in ranks] == [17, 17, 18, 18]


def test_every_rank_is_given_the_full_weights_for_vllms_loaders_to_take_its_shard_from(ranks, random_llama):
    full = {name: list(parameter.shape) for name, parameter in random_llama.named_parameters()}
    for record in ranks:
        assert record["loaded"] == full


def test_a_tensor_parallel_size_that_does_not_divide_the_ranks_is_refused_before_vllm_starts(ranks):
    for record in ranks:
        assert record["refusal"] == tensor_parallel_problem(3, 4)
        assert record["instances_after_refusal"] == 1


def test_the_external_launcher_refuses_an_engine_in_another_process(fake_vllm, monkeypatch):
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    with pytest.raises(ValueError, match="VLLM_ENABLE_V1_MULTIPROCESSING is set to '1'.*unset it or set it to 0"):
        VllmEngine(model_path="/models/prover", dtype="bfloat16", max_model_len=256, seed=0,
                   gpu_memory_utilization=0.5, tensor_parallel_size=2, distributed_executor_backend="external_launcher")
    assert fake_vllm.instances == []
