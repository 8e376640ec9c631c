"""The vLLM engine against a stand-in ``vllm`` package (FakeVllm*): every call it makes is checked."""

from __future__ import annotations

import copy
import os
import sys

import pytest
import torch
from tokenizers import processors

from trainer.config import RunConfig
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


def test_it_sends_each_prompt_as_token_ids_under_an_id_of_its_own(engine, fake_vllm):
    list(engine.generate([[5, 6], [7]], sampling()))
    list(engine.generate([[8, 9, 10]], sampling()))
    added = [entry[1:] for entry in fake_vllm.instances[0].log if entry[0] == "add_request"]
    assert added == [("rollout-0-0", {"prompt_token_ids": [5, 6]}), ("rollout-0-1", {"prompt_token_ids": [7]}),
                     ("rollout-1-0", {"prompt_token_ids": [8, 9, 10]})]


def test_text_prompts_are_tokenized_as_the_learner_tokenizes_them_never_by_vllm(fake_vllm, random_llama, tokenizer):
    # A tokenizer that adds a BOS would, given text, make vLLM sample from a prompt the learner never scores.
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(single="<unk> $A", special_tokens=[("<unk>", 2)])
    assert tokenizer("theorem by")["input_ids"][0] == 2  # this tokenizer does add one
    engine = VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    list(engine.generate(["theorem by"], sampling(n=1)))
    (added,) = [entry[2] for entry in fake_vllm.instances[0].log if entry[0] == "add_request"]
    assert added == {"prompt_token_ids": tokenizer("theorem by", add_special_tokens=False)["input_ids"]}


def test_sampling_params_carry_every_setting_and_a_seed_of_their_own_per_prompt(engine):
    from vllm.sampling_params import RequestOutputKind

    params = [engine._sampling_params(sampling(n=4, temperature=0.7, top_p=0.9, top_k=20, max_tokens=5, seed=100), i)
              for i in (0, 1)]
    assert params[0].kwargs == {"n": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 20, "max_tokens": 5,
                                "seed": 100, "output_kind": RequestOutputKind.DELTA}
    assert params[1].kwargs["seed"] == 104  # vLLM seeds sample i with seed + i: no overlap with prompt 0
    assert engine._sampling_params(sampling(seed=None), 3).kwargs["seed"] is None


def test_it_yields_every_sample_of_every_prompt_with_its_indices(engine):
    generations = list(engine.generate([[5], [6]], sampling(n=3)))
    assert sorted((g.prompt_index, g.sample_index) for g in generations) == [(p, s) for p in range(2) for s in range(3)]


def test_it_converts_vllm_outputs_marking_length_finishes_truncated(engine, fake_vllm):
    eos = fake_vllm.EOS
    by_sample = {g.sample_index: g for g in engine.generate([[5]], sampling(n=3, max_tokens=2))}
    assert by_sample[0].token_ids == [eos] and not by_sample[0].is_truncated and by_sample[0].text == ""
    assert by_sample[1].token_ids == [101, eos] and not by_sample[1].is_truncated and by_sample[1].text == "w1 "
    assert by_sample[2].token_ids == [101, 102] and by_sample[2].is_truncated and by_sample[2].text == "w1 w2 "
    assert all(g.num_tokens == len(g.token_ids) for g in by_sample.values())


def test_it_yields_a_sample_as_soon_as_vllm_finishes_it(engine, fake_vllm):
    loop = fake_vllm.instances[0].llm_engine
    stream = engine.generate([[5]], sampling(n=3, max_tokens=10))
    first = next(stream)
    assert (first.sample_index, loop.steps) == (0, 1)  # sample 0 ends at step 1; samples 1 and 2 are still running
    second = next(stream)
    assert (second.sample_index, loop.steps) == (1, 2)
    third = next(stream)
    assert (third.sample_index, loop.steps) == (2, 3)


def test_it_aborts_unread_requests_when_the_caller_stops_early(engine, fake_vllm):
    stream = engine.generate([[5], [6]], sampling(n=3, max_tokens=10))
    next(stream)
    stream.close()
    log = fake_vllm.instances[0].log
    assert log[-1] == ("abort_request", ["rollout-0-0", "rollout-0-1"])


def test_an_aborted_request_is_an_error_not_an_empty_answer(fake_vllm, random_llama, tokenizer, monkeypatch):
    monkeypatch.setattr(fake_vllm, "abort_reason", "abort")
    engine = VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    with pytest.raises(RuntimeError, match="vLLM aborted sample 0 of prompt 0"):
        list(engine.generate([[5]], sampling(n=1)))


def test_it_pushes_every_weight_by_checkpoint_name_in_the_engines_dtype(engine, fake_vllm, random_llama):
    loaded = fake_vllm.instances[0].model.loaded
    expected = dict(random_llama.named_parameters())
    assert set(loaded) == set(expected)
    for name, tensor in loaded.items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(tensor, expected[name].detach().to(torch.bfloat16))


def test_a_float32_run_pushes_float32_weights(fake_vllm, random_llama, tokenizer):
    VllmEngine.from_config(gpu_config(model={"dtype": "float32"}), random_llama, tokenizer)
    assert {t.dtype for t in fake_vllm.instances[0].model.loaded.values()} == {torch.float32}


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


def test_without_an_in_process_engine_weights_travel_to_the_workers_in_host_memory(fake_vllm, random_llama, tokenizer, monkeypatch):
    monkeypatch.setattr(fake_vllm, "in_process", False)
    monkeypatch.setattr("trainer.rollout.vllm_engine._RPC_BUCKET_BYTES", 4096)
    VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    llm = fake_vllm.instances[0]
    assert len(llm.rpc_buckets) > 1
    sent = [name for bucket in llm.rpc_buckets for name, _ in bucket]
    assert sent == [name for name, _ in random_llama.named_parameters()]
    assert all(tensor.device.type == "cpu" for bucket in llm.rpc_buckets for _, tensor in bucket)
    assert set(llm.model.loaded) == set(sent)


def test_an_in_memory_model_is_staged_for_vllm_and_the_folder_removed_on_close(fake_vllm, random_llama, tokenizer):
    engine = VllmEngine.from_config(gpu_config(model={"source": "tiny_random"}), random_llama, tokenizer)
    folder = fake_vllm.instances[0].kwargs["model"]
    assert os.path.isfile(os.path.join(folder, "config.json")) and os.path.isfile(os.path.join(folder, "tokenizer.json"))
    engine.close()
    assert not os.path.exists(folder)


def test_build_engine_picks_the_engine_the_config_names(fake_vllm, random_llama, tokenizer):
    from trainer.rollout.transformers_engine import TransformersEngine

    assert isinstance(build_engine(gpu_config(), random_llama, tokenizer), VllmEngine)
    cpu = RunConfig.from_preset("cpu-demo", {"model": {"dtype": "float32"}})
    assert isinstance(build_engine(cpu, random_llama, tokenizer), TransformersEngine)


def test_without_vllm_installed_it_says_what_to_do(random_llama, tokenizer, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)
    with pytest.raises(RuntimeError, match="install vllm on the GPU nodes or set rollout.engine to 'transformers'"):
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
