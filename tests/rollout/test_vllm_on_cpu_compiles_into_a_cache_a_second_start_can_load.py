"""vLLM on CPU keeps its compiled graphs where a second start can load them: its ahead-of-time artifacts
fail to load with this torch (every start compiled again), so the engine turns them off unless the operator
set VLLM_USE_AOT_COMPILE (trainer/rollout/vllm_engine.py; the seconds saved: benchmarks/vllm_start_up.py)."""

import os

from trainer.rollout.vllm_engine import use_a_compile_cache_that_loads_on_cpu


def test_the_ahead_of_time_artifacts_are_off_when_nobody_chose(monkeypatch):
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    use_a_compile_cache_that_loads_on_cpu()
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "0"


def test_an_operators_choice_stands(monkeypatch):
    monkeypatch.setenv("VLLM_USE_AOT_COMPILE", "1")
    use_a_compile_cache_that_loads_on_cpu()
    assert os.environ["VLLM_USE_AOT_COMPILE"] == "1"
