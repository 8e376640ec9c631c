"""One rank's peak GPU memory, planned from the model's architecture, without its weights or a GPU.

``python -m trainer memory-plan --preset h100x8`` answers "will this run fit?" before any
GPU is taken, and the platform's launch path refuses a run for which the answer is no
(``check_fits``). Two phases share each GPU, one at a time:

- **learner step**: the learner's own code (``Learner`` and its log-probability, loss and
  AdamW functions) runs one rank's heaviest micro-batch on *fake tensors*
  (``FakeTensorMode``: shapes, dtypes and devices, no storage) of the model's real
  architecture, built from its published config numbers. With several ranks the model is
  sharded by FSDP2 exactly as the learner shards it, over a *fake process group* of the
  run's rank count, and ``torch.distributed._tools.FSDPMemTracker`` records every tensor
  PyTorch would allocate: sharded and gathered parameters, gradients, AdamW's states,
  activations kept for backward (activation checkpointing included), temporaries. To that
  come the CUDA context and what vLLM keeps while asleep.
- **rollout**: vLLM claims ``rollout.vllm_gpu_memory_utilization`` of the GPU (its weights,
  key/value cache and activations live inside that share), next to what the learner keeps
  between steps (its parameter, gradient and AdamW shards, the resident memory the same fake
  run measured) once its cached blocks were returned (``release_cached_accelerator_memory``).

A plan is only as good as the method, so every plan is checked against a measurement
(``validated``): the same micro-step, through the same functions, of a Qwen3-shaped model of
4 layers of hidden 512 (about 30M parameters, a 32,768-token vocabulary), one micro-batch of
four packed sequences, 2,048 tokens, in the run's dtype with activation checkpointing, over 2
ranks under FSDP2: once on fake tensors (rank 0 of a fake group of 2), once for real as 2 CPU
processes in a gloo group on this machine, each rank's real peak read from the operating
system (its resident high-water mark above what it held after its imports and process-group
start-up, the larger of the two ranks). ``validated["what"]`` says all that in words, with
the machine's cores and load average. It validates the method at that size, not the
``h100x8`` run itself: no GPU measured it.

Attention: the learner runs packed micro-batches through its packed attention
(trainer/packed_attention.py, chosen as the learner chooses it, by its own constructor), which
never holds a (length × length) tensor, mask or scores. Inside it, SDPA on fake CPU tensors
would pick PyTorch's math kernel, which does hold the scores; the plan and its validation run
SDPA through torch's flash kernel for CPU, whose memory is the GPU kernels' (outputs and
log-sum-exps only).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.config import RunConfig

GIB = 1024**3
MIB = 1024**2
# Part of learner_plan_key: raise it when a change here changes what plan_learner answers, so that
# plans remembered by the platform are made again.
LEARNER_PLAN_VERSION = 2  # 2: packed micro-batches attend per sequence, no (T × T) mask
# Kept free on every rank: the caching allocator's fragmentation and anything this plan does not see.
SPARE_SHARE = 0.10
# Per process, outside PyTorch's allocator: the CUDA context and NCCL's buffers (about 0.5-0.8 GiB
# on an H100 with torch 2.x); an allowance, not a measurement.
CUDA_CONTEXT_GIB = 1.0
# What vLLM keeps on the GPU asleep at level 2 (CUDA graphs' pool, its sampler's buffers); an
# allowance: its weights and key/value cache are released.
VLLM_ASLEEP_GIB = 1.5
# vLLM profiles one forward pass of up to max_num_batched_tokens inside its own share; an allowance.
VLLM_ACTIVATIONS_GIB = 2.0

# Published config.json numbers of the models the recipe and its bigger siblings use; the plan
# needs no download. A local folder with a config.json works for any other model.
KNOWN_ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "Qwen/Qwen3-1.7B": ("qwen3", dict(
        hidden_size=2048, num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        intermediate_size=6144, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960)),
    "Qwen/Qwen3-8B": ("qwen3", dict(
        hidden_size=4096, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8, head_dim=128,
        intermediate_size=12288, vocab_size=151936, tie_word_embeddings=False, max_position_embeddings=40960)),
    "Qwen/Qwen3-32B": ("qwen3", dict(
        hidden_size=5120, num_hidden_layers=64, num_attention_heads=64, num_key_value_heads=8, head_dim=128,
        intermediate_size=25600, vocab_size=151936, tie_word_embeddings=False, max_position_embeddings=40960)),
    "Qwen/Qwen2.5-7B": ("qwen2", dict(
        hidden_size=3584, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4,
        intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False, max_position_embeddings=131072)),
    "Qwen/Qwen2.5-32B": ("qwen2", dict(
        hidden_size=5120, num_hidden_layers=64, num_attention_heads=40, num_key_value_heads=8,
        intermediate_size=27648, vocab_size=152064, tie_word_embeddings=False, max_position_embeddings=131072)),
}
# Fine-tunes that keep their base model's architecture.
KNOWN_ARCHITECTURES["AI-MO/Kimina-Prover-Distill-1.7B"] = KNOWN_ARCHITECTURES["Qwen/Qwen3-1.7B"]
KNOWN_ARCHITECTURES["AI-MO/Kimina-Prover-Distill-8B"] = KNOWN_ARCHITECTURES["Qwen/Qwen3-8B"]

# The validation's model: Qwen3's layer shapes at the least size that exercises what the plan
# claims (4 layers of hidden 512, so layers, activations and checkpointing weigh as well as the
# embedding and the logits), small enough for a real two-rank step on two CPU cores.
VALIDATION_ARCHITECTURE = ("qwen3", dict(
    hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4, head_dim=64,
    intermediate_size=1536, vocab_size=32768, tie_word_embeddings=True, max_position_embeddings=4096))
# Four 512-token sequences packed into one 2,048-token micro-batch: the packed attention path.
VALIDATION_LENGTHS = {"max_prompt_tokens": 128, "max_response_tokens": 384}
VALIDATION_MICRO_BATCH_TOKENS = 2048
VALIDATION_RANKS = 2

_PLANNING_LOCK = threading.Lock()  # the fake process group is process-wide


class ArchitectureUnknown(ValueError):
    """The plan cannot find the model's architecture without downloading it."""


@dataclass(frozen=True)
class LearnerMemory:
    """One rank's learner phase, in bytes, as FSDPMemTracker / MemTracker saw it."""

    peak_bytes: int  # every live tensor at the step's heaviest moment
    resident_bytes: int  # what stays between steps: parameter, gradient and AdamW shards
    micro_batch_sequences: int
    micro_batch_tokens: int  # tokens in the planned (heaviest) micro-batch, padding included


@dataclass(frozen=True)
class VllmMemory:
    """One rank's vLLM engine: its share of the GPU and what must fit inside it, in bytes."""

    share_bytes: int
    weights_bytes: int
    kv_bytes_per_token: int
    max_model_len: int
    tensor_parallel_size: int

    @property
    def kv_cache_bytes(self) -> int:
        return self.share_bytes - self.weights_bytes - int(VLLM_ACTIVATIONS_GIB * GIB)

    @property
    def kv_cache_tokens(self) -> int:
        return max(self.kv_cache_bytes, 0) // self.kv_bytes_per_token


@dataclass
class MemoryPlan:
    preset: str
    model: str
    max_response_tokens: int
    ranks: int
    gpu_memory_gib: float
    learner: LearnerMemory
    vllm: VllmMemory
    validated: dict[str, Any] | None = None  # predicted_mib, measured_mib, what (the model, tokens, ranks, machine)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def usable_gib(self) -> float:
        return self.gpu_memory_gib * (1 - SPARE_SHARE)

    @property
    def learner_peak_gib(self) -> float:
        return self.learner.peak_bytes / GIB + CUDA_CONTEXT_GIB + VLLM_ASLEEP_GIB

    @property
    def rollout_peak_gib(self) -> float:
        return self.learner.resident_bytes / GIB + CUDA_CONTEXT_GIB + self.vllm.share_bytes / GIB

    def problems(self) -> list[str]:
        """Each part that does not fit, by how much, and what to change; empty when all fit."""
        usable = self.usable_gib
        where = (f"the {usable:.1f} GiB a rank may use ({self.gpu_memory_gib:g} GiB GPU, "
                 f"{SPARE_SHARE:.0%} kept spare)")
        found = []
        if self.learner_peak_gib > usable:
            found.append(
                f"learner step: {self.learner_peak_gib:.1f} GiB per rank, over {where} by "
                f"{self.learner_peak_gib - usable:.1f} GiB; lower optimizer.micro_batch_tokens or "
                f"optimizer.micro_batch_sequences, shorten rollout.max_response_tokens, or use more GPUs"
            )
        if self.rollout_peak_gib > usable:
            found.append(
                f"rollout: {self.rollout_peak_gib:.1f} GiB per rank (vLLM's share "
                f"{self.vllm.share_bytes / GIB:.1f} GiB next to the learner's "
                f"{self.learner.resident_bytes / GIB:.1f} GiB of shards), over {where} by "
                f"{self.rollout_peak_gib - usable:.1f} GiB; lower rollout.vllm_gpu_memory_utilization"
            )
        one_sequence = self.vllm.kv_bytes_per_token * self.vllm.max_model_len
        if self.vllm.kv_cache_bytes < one_sequence:
            short = (one_sequence - self.vllm.kv_cache_bytes) / GIB
            found.append(
                f"rollout: vLLM's share of {self.vllm.share_bytes / GIB:.1f} GiB holds its weights "
                f"({self.vllm.weights_bytes / GIB:.1f} GiB) but not the key/value cache of one "
                f"{self.vllm.max_model_len}-token sequence ({one_sequence / GIB:.1f} GiB): short by {short:.1f} GiB; "
                f"raise rollout.vllm_gpu_memory_utilization or rollout.vllm_tensor_parallel_size"
            )
        return found

    @property
    def fits(self) -> bool:
        return not self.problems()

    def to_json(self) -> dict[str, Any]:
        """The contract of ``memory-plan --json``."""
        return {
            "preset": self.preset,
            "model": self.model,
            "max_response_tokens": self.max_response_tokens,
            "ranks": self.ranks,
            "gpu_memory_gib": self.gpu_memory_gib,
            "per_rank_peak_gib": {"learner": round(self.learner_peak_gib, 2), "rollout": round(self.rollout_peak_gib, 2)},
            "fits": self.fits,
            "validated": self.validated,
        }


# --- the model's architecture -------------------------------------------------------------------------


def model_label(config: RunConfig) -> str:
    from trainer.config import ModelSource

    if config.model.init_checkpoint:
        return config.model.init_checkpoint
    if config.model.source is ModelSource.HUGGINGFACE:
        return config.model.name_or_path
    return config.model.source.value


def architecture_of(config: RunConfig):
    """The model's transformers config (shapes only): a local config.json, or a known model's numbers."""
    from transformers import AutoConfig, LlamaConfig

    from trainer.config import ModelSource
    from trainer.models import TINY_RANDOM_SHAPE

    folder = config.model.init_checkpoint or (
        config.model.name_or_path if config.model.source is ModelSource.HUGGINGFACE else None)
    if folder and (Path(folder) / "config.json").is_file():
        return AutoConfig.from_pretrained(folder)
    if config.model.source is ModelSource.TINY_RANDOM:
        return LlamaConfig(vocab_size=49152, tie_word_embeddings=True, **TINY_RANDOM_SHAPE)
    if config.model.source is ModelSource.SMOLLM2_GGUF:
        return LlamaConfig(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                           num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True,
                           max_position_embeddings=8192)
    name = config.model.name_or_path
    if name in KNOWN_ARCHITECTURES:
        return transformers_config(*KNOWN_ARCHITECTURES[name])
    raise ArchitectureUnknown(
        f"the memory plan does not know the architecture of model {name!r} and downloads nothing; "
        f"use one of {', '.join(sorted(KNOWN_ARCHITECTURES))}, or a local folder with its config.json"
    )


def transformers_config(model_type: str, numbers: dict[str, Any]):
    from transformers import AutoConfig

    return AutoConfig.for_model(model_type, **numbers)


# --- the learner phase, on fake tensors -----------------------------------------------------------------


class _PlanTokenizer:
    pad_token_id = 0


def full_length_sequences(config: RunConfig):
    """Enough full-length sequences (longest prompt, longest answer) to fill one micro-batch."""
    from trainer.learner import TrainingSequence

    rollout = config.rollout
    prompt_tokens = max(rollout.max_prompt_tokens, config.retry.max_prompt_tokens if config.retry.enabled else 0)
    sequence_tokens = prompt_tokens + rollout.max_response_tokens
    token_budget = config.optimizer.micro_batch_tokens
    count = max(1, token_budget // sequence_tokens) if token_budget else config.optimizer.micro_batch_sequences
    # Advantages of both signs: the dual clip's branch runs too.
    return [TrainingSequence(prompt_ids=[1] * prompt_tokens, response_ids=[2] * rollout.max_response_tokens,
                             advantage=1.0 if index % 2 == 0 else -1.0, group_key=f"plan-{index}")
            for index in range(count)]


def heaviest_micro_batch(learner, config: RunConfig):
    """One rank's largest forward pass, as the learner's own batching forms it from full-length sequences."""
    from trainer.learner import sequence_tokens

    micro_batches = learner.micro_batches(full_length_sequences(config))
    return max(micro_batches, key=lambda micro: sum(sequence_tokens(s) for s in micro))


def learner_micro_step(learner, micro_batch, after_old_logprobs=lambda: None) -> None:
    """One rank's heaviest moment of a learner step, through the learner's own functions.

    π_old's forward pass (no graph), then the forward and backward pass of the micro-batch
    (the learner's batch layout, log-probabilities and loss) and AdamW's step. The plan runs
    it on fake tensors, the validation for real, deploy/gpu_check.py on a GPU.
    """
    import torch

    from trainer.learner import clipped_token_loss, constant_divisor_loss

    loss_config = learner.config.loss
    batch = learner._batch(micro_batch)
    with torch.no_grad():
        old_logprobs = learner._logprobs(batch)  # (B, K)
    after_old_logprobs()
    logprobs = learner._logprobs(batch)  # (B, K)
    token_loss = clipped_token_loss(logprobs, old_logprobs, batch.advantages, loss_config.clip_ratio_low,
                                    loss_config.clip_ratio_high, loss_config.dual_clip)
    loss = constant_divisor_loss(token_loss, batch.response_mask, learner.token_loss_divisor)
    loss.backward()
    del batch, old_logprobs, logprobs, token_loss, loss
    learner.optimizer.step()


def fused_attention():
    """Attention as a GPU runs it (no length × length scores); see the module docstring."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION])


@contextlib.contextmanager
def _fake_ranks(world_size: int):
    """A fake process group of ``world_size`` ranks (this process is rank 0), for FSDP to shard over.

    FSDP builds its device mesh from real rank numbers, which FakeTensorMode would make fake:
    the mesh is built here, outside the mode, and handed to ``fully_shard``.
    """
    import torch
    import torch.distributed as dist
    import torch.distributed.fsdp._fully_shard._fully_shard as fully_shard_module
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if world_size <= 1:
        yield
        return
    if dist.is_initialized():
        raise RuntimeError("the memory plan needs a process of its own: torch.distributed is already initialized here; "
                           "run `python -m trainer memory-plan` instead")
    saved_world_size = os.environ.get("WORLD_SIZE")
    saved_default_mesh = fully_shard_module._init_default_mesh
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        mesh = init_device_mesh(torch._C._get_accelerator().type, (world_size,))
        fully_shard_module._init_default_mesh = lambda *args, **kwargs: mesh
        os.environ["WORLD_SIZE"] = str(world_size)  # the learner shards when it sees several ranks
        yield
    finally:
        fully_shard_module._init_default_mesh = saved_default_mesh
        if saved_world_size is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = saved_world_size
        dist.destroy_process_group()


def _learner_on(config: RunConfig, architecture):
    """The learner, built by its own constructor, around a model of ``architecture``'s shapes (float32 master weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.learner import Learner

    architecture._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    # Module.to cannot swap fake parameters (torch 2.13); they are on the learner's device already.
    model.to = lambda *args, **kwargs: model
    return Learner(config, model, _PlanTokenizer())


def plan_learner(config: RunConfig, architecture=None) -> LearnerMemory:
    """One rank's learner phase on fake tensors: peak and resident bytes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    architecture = architecture if architecture is not None else architecture_of(config)
    ranks = max(config.cluster.num_gpus, 1)
    with _PLANNING_LOCK, _fake_ranks(ranks), FakeTensorMode(allow_non_fake_inputs=True):
        learner = _learner_on(config, architecture)
        micro_batch = heaviest_micro_batch(learner, config)
        warm_optimizer(learner)
        if learner.is_sharded:
            tracker = FSDPMemTracker(learner.model, learner.optimizer)
        else:
            tracker = MemTracker()
            tracker.track_external(learner.model, learner.optimizer)
        with tracker, fused_attention():
            # FSDPMemTracker follows one forward and backward per module; π_old's pass is a first one.
            learner_micro_step(learner, micro_batch, after_old_logprobs=tracker.reset_mod_stats)
        peak = _total(tracker.get_tracker_snapshot("peak"))
        resident = _total(tracker.get_tracker_snapshot("current"))
        del learner, tracker
    tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in micro_batch)
    return LearnerMemory(peak, resident, len(micro_batch), tokens)


def warm_optimizer(learner) -> None:
    """Gradients and AdamW's states as they stand between steps (they persist: zero_grad keeps them)."""
    import torch

    for parameter in learner.model.parameters():
        if parameter.requires_grad:
            parameter.grad = torch.zeros_like(parameter)
    learner.optimizer.step()


def _total(snapshot: dict) -> int:
    return int(sum(per_device.get("Total", 0) for per_device in snapshot.values()))


# --- the rollout phase --------------------------------------------------------------------------------------


def plan_vllm(config: RunConfig, architecture=None) -> VllmMemory:
    """vLLM's share of one GPU and its contents: weights (meta device) and key/value cache per token."""
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.compute_dtype import resolve_compute_dtype

    architecture = architecture if architecture is not None else architecture_of(config)
    dtype = resolve_compute_dtype(config.model.dtype, "cuda").torch_dtype()  # planned for GPUs, here or not
    tensor_parallel = config.rollout.vllm_tensor_parallel_size
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=dtype)
    weights = sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
    head_dim = getattr(architecture, "head_dim", None) or architecture.hidden_size // architecture.num_attention_heads
    # Key and value, every layer; tensor parallelism splits the KV heads (replicating them when fewer).
    kv_heads_per_rank = max(architecture.num_key_value_heads // tensor_parallel, 1)
    kv_per_token = 2 * architecture.num_hidden_layers * kv_heads_per_rank * head_dim * dtype.itemsize
    rollout = config.rollout
    longest_prompt = max(rollout.max_prompt_tokens, config.retry.max_prompt_tokens if config.retry.enabled else 0)
    return VllmMemory(
        share_bytes=int(rollout.vllm_gpu_memory_utilization * config.cluster.gpu_memory_gib * GIB),
        weights_bytes=weights // tensor_parallel,
        kv_bytes_per_token=kv_per_token,
        max_model_len=longest_prompt + rollout.max_response_tokens,
        tensor_parallel_size=tensor_parallel,
    )


# --- the plan, its validation, and the launch check -------------------------------------------------------------


def plan(config: RunConfig, *, validate: bool = True, learner: LearnerMemory | None = None) -> MemoryPlan:
    """The whole plan; ``learner`` stands in for the learner's plan when the caller made it already."""
    if config.cluster.num_gpus == 0:
        raise ValueError(f"preset {config.preset!r} runs on CPU (cluster.num_gpus is 0): there is no GPU memory to plan")
    from trainer.ranks import check_world_fits_config

    check_world_fits_config(config, config.cluster.num_gpus)  # a run the trainer would refuse is not planned
    architecture = architecture_of(config)
    result = MemoryPlan(
        preset=config.preset, model=model_label(config), max_response_tokens=config.rollout.max_response_tokens,
        ranks=config.cluster.num_gpus, gpu_memory_gib=config.cluster.gpu_memory_gib,
        learner=learner or cached_plan_learner(config), vllm=plan_vllm(config, architecture),
        settings={
            "micro_batch_sequences": config.optimizer.micro_batch_sequences,
            "micro_batch_tokens": config.optimizer.micro_batch_tokens,
            "vllm_gpu_memory_utilization": config.rollout.vllm_gpu_memory_utilization,
            "vllm_tensor_parallel_size": config.rollout.vllm_tensor_parallel_size,
            "gradient_checkpointing": config.model.gradient_checkpointing,
        },
    )
    if validate:
        result.validated = validate_on_cpu(config)
    return result


def validation_config(config: RunConfig) -> RunConfig:
    """``config`` at a size this machine runs for real: 2 ranks, the validation's model, four 512-token sequences.

    The run's dtype and optimizer settings stay; activation checkpointing is on, as the plan's
    recipe runs it; the micro-batch is one of ``VALIDATION_MICRO_BATCH_TOKENS`` packed tokens.
    """
    from trainer.config import RunConfig

    data = config.model_dump(mode="python")
    data["cluster"] = {**data["cluster"], "num_gpus": VALIDATION_RANKS}
    data["model"] = {**data["model"], "gradient_checkpointing": True}
    data["rollout"] = {**data["rollout"], "engine": "transformers", "vllm_tensor_parallel_size": 1, **VALIDATION_LENGTHS}
    data["retry"] = {**data["retry"], "max_prompt_tokens": VALIDATION_LENGTHS["max_prompt_tokens"]}
    data["optimizer"] = {**data["optimizer"], "micro_batch_tokens": VALIDATION_MICRO_BATCH_TOKENS}
    return RunConfig.model_validate(data)


def describe_validation(config: RunConfig, planned: LearnerMemory) -> str:
    """``validated["what"]``: the model, its tokens and ranks, and the machine, in words."""
    import torch
    from transformers import AutoModelForCausalLM

    architecture = transformers_config(*VALIDATION_ARCHITECTURE)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (f"Qwen3-shaped model, {architecture.num_hidden_layers} layers of hidden {architecture.hidden_size}, "
            f"vocabulary {architecture.vocab_size:,}, {parameters / 1e6:.1f}M parameters, {config.model.dtype} "
            f"compute, float32 master weights, activation checkpointing; one micro-batch of "
            f"{planned.micro_batch_sequences} packed sequences, {planned.micro_batch_tokens:,} tokens; "
            f"{VALIDATION_RANKS} ranks under FSDP2 (gloo, one CPU process each); measured: the larger rank's "
            f"resident high-water mark above what it held after its imports and process-group start-up; "
            f"predicted: rank 0 of the plan's fake-tensor run; machine: {os.cpu_count()} CPU cores, load average "
            f"{load} (1, 5, 15 min) when it ran. A validation of the method at this size, not of a GPU run")


def validate_on_cpu(config: RunConfig) -> dict[str, Any]:
    """The plan's method against a measurement: the same micro-step, fake and real, of the validation's model, 2 ranks.

    Each real rank is a fresh process (``python -m trainer.memory_plan measure``), so what this
    one already allocated does not blur the reading.
    """
    small = validation_config(config)
    planned = plan_learner(small, transformers_config(*VALIDATION_ARCHITECTURE))
    measured = max(rank["peak_bytes"] for rank in measure_ranks(small))
    return {"predicted_mib": round(planned.peak_bytes / MIB, 1), "measured_mib": round(measured / MIB, 1),
            "what": describe_validation(small, planned)}


def measure_ranks(config: RunConfig) -> list[dict]:
    """Run ``config``'s ranks as real CPU processes in one gloo group; each rank's reading, by rank."""
    import socket
    import subprocess
    import sys
    import tempfile
    import time

    ranks = config.cluster.num_gpus
    with socket.socket() as probe:  # a free port for the group's rendezvous
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parent.parent
    python_path = os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))
    config_json = json.dumps(config.to_json_dict())
    processes, outputs = [], []
    # Files, not pipes: a rank blocked on a full pipe would stall its partner at the next collective.
    with contextlib.ExitStack() as files:
        for rank in range(ranks):
            # MALLOC_MMAP_THRESHOLD_: glibc maps every allocation over 64 KiB on its own and unmaps it when
            # freed, so the resident set follows the live tensors (by default freed blocks up to 32 MiB stay
            # in its heap, and the reading counted them as if they were still in use).
            environment = {**os.environ, "PYTHONPATH": python_path, "RANK": str(rank), "LOCAL_RANK": str(rank),
                           "WORLD_SIZE": str(ranks), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                           "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": "", "MALLOC_MMAP_THRESHOLD_": "65536"}
            stdin, stdout, stderr = (files.enter_context(tempfile.TemporaryFile("w+")) for _ in range(3))
            stdin.write(config_json)
            stdin.seek(0)
            processes.append((subprocess.Popen([sys.executable, "-m", "trainer.memory_plan", "measure"], stdin=stdin,
                                               stdout=stdout, stderr=stderr, text=True, cwd=root, env=environment),
                              stdout, stderr))
        try:
            # Polled together: a rank that failed leaves its partner waiting at a collective until gloo's timeout.
            deadline = time.monotonic() + 900
            while any(process.poll() is None for process, _, _ in processes):
                if any(process.returncode for process, _, _ in processes) or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            for rank, (process, _, stderr) in enumerate(processes):
                if process.poll():  # a failed rank first: its error is the cause
                    stderr.seek(0)
                    raise RuntimeError(f"the validation's measured rank {rank} of {ranks} failed "
                                       f"(exit {process.returncode}): {stderr.read().strip()[-2000:]}")
            for rank, (process, stdout, _) in enumerate(processes):
                if process.poll() is None:
                    raise RuntimeError(f"the validation's measured rank {rank} of {ranks} ran past 900 s; "
                                       "run `python -m trainer memory-plan` again on a less loaded machine")
                stdout.seek(0)
                outputs.append(json.loads(stdout.read().strip().splitlines()[-1]))
        finally:
            for process, _, _ in processes:
                if process.poll() is None:
                    process.kill()
    return outputs


def measure_real_step(config: RunConfig) -> int:
    """Run the validation's micro-step for real as this rank on this CPU; the peak resident bytes the learner added.

    What the plan does not count is left out of the reading: the imports (torch, transformers,
    the model's module, FSDP) and the process group's start-up (the plan's CUDA-context-and-NCCL
    allowance covers it on a GPU) happen before the first reading, and memory freed while the
    model was built and sharded is handed back to the operating system (``malloc_trim``)
    before the step. One unmeasured step runs first (see below); what stays between steps is
    read from the anonymous resident pages, the step's rise from the resident high-water mark.
    """
    # Imported before the first reading, so that their memory is not counted as the step's.
    import torch
    import torch.distributed as dist
    import torch.distributed.fsdp
    import transformers.models.qwen3.modeling_qwen3  # noqa: F401  (loaded before the reading, not used by name)
    from transformers import AutoModelForCausalLM  # noqa: F401  (loaded before the reading, not used by name)

    import trainer.learner  # noqa: F401  (loaded before the reading, not used by name)

    torch.manual_seed(0)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo")
        dist.barrier()  # the group's connections are made before the reading, not during the step
    _return_freed_memory()
    before = _anonymous_resident_bytes()
    learner = real_learner(config)
    warm_optimizer(learner)
    micro_batch = heaviest_micro_batch(learner, config)
    # One step first, unmeasured, as a step mid-training follows others: the kernels' code pages
    # and one-time set-up land in the resident set then, not in the measured step.
    with fused_attention():
        learner_micro_step(learner, micro_batch)
    _return_freed_memory()
    # Anonymous pages only (the heap: tensors), not the libraries' code paged in since the first reading.
    kept_between_steps = _anonymous_resident_bytes() - before
    added = kept_between_steps + peak_resident_bytes_added(lambda: learner_micro_step(learner, micro_batch))
    if dist.is_initialized():
        dist.destroy_process_group()
    return added


def _return_freed_memory() -> None:
    """Hand memory that Python and glibc freed but kept back to the kernel, so the resident set counts live memory."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the reading keeps what the allocator holds
        pass


def peak_resident_bytes_added(run) -> int:
    """How far ``run()`` raises this process's resident set above where it stood, at its peak; attention fused as planned.

    Read from Linux's resident high-water mark, reset just before ``run``, so what the process
    allocated earlier (loading, building the model) does not blur the reading.
    """
    before = _resident_bytes()
    _reset_resident_high_water_mark()
    with fused_attention():
        run()
    return _resident_high_water_mark() - before


def real_learner(config: RunConfig, architecture=None):
    """The learner, built by its own constructor, around a fresh float32 model of ``architecture``'s shapes, for real.

    The validation's small Qwen3 by default; benchmarks/learner_memory.py gives its own shapes.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.learner import Learner

    architecture = architecture if architecture is not None else transformers_config(*VALIDATION_ARCHITECTURE)
    architecture._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    return Learner(config, model, _PlanTokenizer())


def _proc_status_bytes(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {key}; the measured validation needs Linux")


def _resident_bytes() -> int:
    return _proc_status_bytes("VmRSS")


def _anonymous_resident_bytes() -> int:
    return _proc_status_bytes("RssAnon")


def _resident_high_water_mark() -> int:
    return _proc_status_bytes("VmHWM")


def _reset_resident_high_water_mark() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # "5" resets VmHWM to the current resident size (proc(5))


def learner_plan_key(config: RunConfig) -> str:
    """What the learner's plan depends on: the config fields it reads (not the GPU's size, nor vLLM's
    share) and the versions of the code that makes it. Equal keys, equal plans, so a plan may be
    remembered under its key, in this process or (the platform does) in the database."""
    import torch
    import transformers

    data = config.model_dump(mode="json")
    rollout = {name: value for name, value in data["rollout"].items() if not name.startswith("vllm_")}
    return json.dumps({"model": data["model"], "rollout": rollout, "retry": data["retry"],
                       "optimizer": data["optimizer"], "loss": data["loss"], "num_gpus": data["cluster"]["num_gpus"],
                       "plan_version": LEARNER_PLAN_VERSION, "torch": torch.__version__,
                       "transformers": transformers.__version__}, sort_keys=True)


@functools.lru_cache(maxsize=32)
def _cached_learner_plan(key: str, config_json: str) -> LearnerMemory:
    from trainer.config import RunConfig

    return plan_learner(RunConfig.model_validate_json(config_json))


def cached_plan_learner(config: RunConfig) -> LearnerMemory:
    """``plan_learner``, remembered in this process: the launch check asks again for every form submission."""
    return _cached_learner_plan(learner_plan_key(config), config.model_dump_json())


# How a caller gets the learner's plan for a config (``cached_plan_learner``, or the platform's stored plans).
LearnerPlanner = Callable[["RunConfig"], LearnerMemory]


# The config field each part's message belongs to, for the launch form and the API.
_FIELD_OF_PART = {"learner step": "rollout.max_response_tokens", "rollout": "rollout.vllm_gpu_memory_utilization",
                  "memory plan": "model.name_or_path"}


def _fit_problems(config: RunConfig, learner_plan: LearnerPlanner) -> list[tuple[str, str]]:
    """(config field, message) for each reason ``config`` cannot run on its GPUs."""
    if config.cluster.num_gpus == 0:
        return []
    from trainer.ranks import rank_rule_problems

    # The trainer's own start-up rules for its ranks first: a run it would refuse is refused here, unplanned.
    refused = rank_rule_problems(config, config.cluster.num_gpus)
    if refused:
        return [(config_field, f"ranks: {message}") for config_field, message in refused]
    try:
        messages = plan(config, validate=False, learner=learner_plan(config)).problems()
    except ArchitectureUnknown as error:
        messages = [f"memory plan: {error}"]
    return [(_FIELD_OF_PART.get(message.split(":", 1)[0], "__all__"), message) for message in messages]


def check_fits(config: RunConfig, *, learner_plan: LearnerPlanner = cached_plan_learner) -> list[str]:
    """Why ``config`` would not fit its GPUs, one message per part over and by how much; empty when it fits.

    CPU runs (cluster.num_gpus 0) have nothing to check. A run the trainer would refuse at
    start-up for its number of ranks (trainer/distributed.py ``rank_rule_problems``: vLLM's
    tensor-parallel size, the mini-batch) is refused with that reason. A model whose
    architecture the plan cannot find is refused with the reason: a launch is never waved
    through unplanned. The first call for a learner configuration takes seconds to minutes (the
    fake-tensor run of the whole model); ``learner_plan`` remembers its answer (in this process by
    default; the platform keeps them in its database, ``runs.models.LearnerPlan``).
    """
    return [message for _, message in _fit_problems(config, learner_plan)]


def check_fits_by_field(config: RunConfig, *,
                         learner_plan: LearnerPlanner = cached_plan_learner) -> dict[str, list[str]]:
    """``check_fits``'s messages keyed by the config field a person would change; empty when it fits."""
    errors: dict[str, list[str]] = {}
    for config_field, message in _fit_problems(config, learner_plan):
        errors.setdefault(config_field, []).append(message)
    return errors


# --- the smallest number of GPUs for a model -------------------------------------------------------------------

RANK_COUNTS = (1, 2, 4, 8, 16, 32, 64)
TENSOR_PARALLEL_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class Sizing:
    """The fewest GPUs a model trains on with this recipe, and the settings that make it fit."""

    model: str
    ranks: int
    micro_batch_tokens: int | None
    vllm_tensor_parallel_size: int
    vllm_gpu_memory_utilization: float
    plan: MemoryPlan


def _with(config: RunConfig, **sections: dict) -> RunConfig:
    from trainer.config import RunConfig

    data = config.model_dump(mode="python")
    for section, values in sections.items():
        data[section] = {**data[section], **values}
    return RunConfig.model_validate(data)


def smallest_fit(config: RunConfig) -> Sizing | None:
    """The fewest ranks (then the smallest vLLM tensor parallel size, then the largest vLLM share) that fit.

    The learner's micro-batch stays one full-length sequence (the least a token budget may be);
    rank counts whose AdamW shards alone leave no room are skipped without a fake-tensor run, and
    so are settings the trainer refuses for that many ranks (``rank_rule_problems``: the
    mini-batch must split over the ranks, the tensor-parallel size must divide them).
    None when even the most ranks tried do not fit.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.ranks import rank_rule_problems

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture_of(config), dtype=torch.float32)
    # Weights, gradients and AdamW's two moments, float32 each: a lower bound of what a rank keeps.
    state_bytes = 4 * 4 * sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    usable = config.cluster.gpu_memory_gib * (1 - SPARE_SHARE)
    prompt_tokens = max(config.rollout.max_prompt_tokens, config.retry.max_prompt_tokens if config.retry.enabled else 0)
    budget = prompt_tokens + config.rollout.max_response_tokens
    for ranks in allowed_rank_counts(config):
        if state_bytes / ranks / GIB + CUDA_CONTEXT_GIB + VLLM_ASLEEP_GIB >= usable:
            continue
        candidate = _with(config, cluster={"num_gpus": ranks}, optimizer={"micro_batch_tokens": budget})
        learner = cached_plan_learner(candidate)
        for tensor_parallel in TENSOR_PARALLEL_SIZES:
            if rank_rule_problems(_with(candidate, rollout={"vllm_tensor_parallel_size": tensor_parallel}), ranks):
                continue
            for share in (0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1):
                sized = _with(candidate, rollout={"vllm_tensor_parallel_size": tensor_parallel,
                                                  "vllm_gpu_memory_utilization": share})
                result = plan(sized, validate=False, learner=learner)
                if result.fits:
                    return Sizing(model_label(config), ranks, budget, tensor_parallel, share, result)
    return None


def allowed_rank_counts(config: RunConfig) -> list[int]:
    """The rank counts ``smallest_fit`` tries: those the trainer accepts ``config``'s mini-batch at."""
    from trainer.ranks import rank_rule_problems

    single = _with(config, rollout={"vllm_tensor_parallel_size": 1})
    return [ranks for ranks in RANK_COUNTS
            if not rank_rule_problems(_with(single, cluster={"num_gpus": ranks}), ranks)]


def format_sizing(sizing: Sizing | None, config: RunConfig) -> str:
    if sizing is None:
        most = max(allowed_rank_counts(config), default=1)
        why = "" if most == RANK_COUNTS[-1] else (
            f"; more ranks than optimizer.mini_batch_prompts ({config.optimizer.mini_batch_prompts}) splits over "
            "are not tried")
        return f"{model_label(config)}: does not fit even {most} GPUs of {config.cluster.gpu_memory_gib:g} GiB{why}"
    result = sizing.plan
    return (f"| {sizing.model} | {sizing.ranks} | {sizing.micro_batch_tokens:,} | {sizing.vllm_tensor_parallel_size} | "
            f"{sizing.vllm_gpu_memory_utilization:.1f} | {result.learner_peak_gib:.1f} | {result.rollout_peak_gib:.1f} | "
            f"{result.vllm.kv_cache_tokens // result.vllm.max_model_len} |")


SIZING_HEADER = ("| model | GPUs (ranks) | micro_batch_tokens | vLLM tensor parallel | vLLM share | learner GiB/rank | "
                 "rollout GiB/rank | full-length sequences in vLLM's KV cache |\n| --- | --- | --- | --- | --- | --- | --- | --- |")


# --- the table for people -----------------------------------------------------------------------------------------


def format_table(result: MemoryPlan) -> str:
    vllm = result.vllm
    learner = result.learner
    lines = [
        f"memory plan: preset {result.preset}, model {result.model}, {result.ranks} rank(s) of "
        f"{result.gpu_memory_gib:g} GiB, answers up to {result.max_response_tokens} tokens",
        f"settings: {', '.join(f'{k}={v}' for k, v in result.settings.items())}",
        "",
        f"{'per rank':<58}{'GiB':>9}",
        f"{'learner step (fake tensors, FSDPMemTracker)':<58}{learner.peak_bytes / GIB:>9.2f}",
        f"{'  of which resident between steps (shards, AdamW)':<58}{learner.resident_bytes / GIB:>9.2f}",
        f"{'  heaviest micro-batch':<58}{learner.micro_batch_sequences:>4} seq, {learner.micro_batch_tokens} tokens",
        f"{'  + CUDA context and NCCL (allowance)':<58}{CUDA_CONTEXT_GIB:>9.2f}",
        f"{'  + vLLM asleep (allowance)':<58}{VLLM_ASLEEP_GIB:>9.2f}",
        f"{'learner phase peak':<58}{result.learner_peak_gib:>9.2f}",
        f"{'rollout: vLLM share (gpu_memory_utilization × GPU)':<58}{vllm.share_bytes / GIB:>9.2f}",
        f"{'  inside it: weights (tensor parallel ' + str(vllm.tensor_parallel_size) + ')':<58}{vllm.weights_bytes / GIB:>9.2f}",
        f"{'  inside it: key/value cache':<58}{vllm.kv_cache_bytes / GIB:>9.2f}"
        f"  ({vllm.kv_cache_tokens:,} tokens, {vllm.kv_cache_tokens // vllm.max_model_len} full sequences)",
        f"{'  + learner resident + CUDA context':<58}{learner.resident_bytes / GIB + CUDA_CONTEXT_GIB:>9.2f}",
        f"{'rollout phase peak':<58}{result.rollout_peak_gib:>9.2f}",
        f"{'usable per rank (' + format(SPARE_SHARE, '.0%') + ' kept spare)':<58}{result.usable_gib:>9.2f}",
        "",
        "fits" if result.fits else "DOES NOT FIT:\n  " + "\n  ".join(result.problems()),
    ]
    if result.validated:
        predicted, measured = result.validated["predicted_mib"], result.validated["measured_mib"]
        lines.append(f"validated on this CPU: predicted {predicted:.1f} MiB, measured {measured:.1f} MiB "
                     f"({predicted / measured - 1:+.0%}); {result.validated['what']}")
    return "\n".join(lines)


def _measure_main() -> int:
    """``python -m trainer.memory_plan measure`` < config JSON: the validation's real run, in its own process."""
    import sys

    from trainer.config import RunConfig

    config = RunConfig.model_validate(json.loads(sys.stdin.read()))
    print(json.dumps({"rank": int(os.environ.get("RANK", "0")), "peak_bytes": measure_real_step(config)}))
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["measure"]:
        sys.exit("usage: python -m trainer.memory_plan measure < config.json (the plan's validation; "
                 "people want `python -m trainer memory-plan`)")
    sys.exit(_measure_main())


__all__ = ["MemoryPlan", "check_fits", "format_table", "plan", "plan_learner", "plan_vllm"]
