"""One rank's peak GPU memory, planned from the model's architecture, without its weights or a GPU.

``python -m trainer memory-plan --preset h100x8`` answers "will this run fit?" before any
GPU is taken, and the platform's launch path refuses a run for which the answer is no
(trainer/memory/memory_fit.py, ``check_fits``). Two phases share each GPU, one at a time:

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

**Two pools** (an asynchronous run, ``cluster.rollout_gpus`` > 0; trainer/staleness.py): the phases
no longer share a GPU. The learner's FSDP shards over the learner pool's
``num_gpus − rollout_gpus`` ranks, which hold no vLLM memory at all (no sleep and wake): their peak
is the learner step, or learner rank 0 gathering the full weights for the push to the pool,
whichever is higher: FSDP gathers one float32 parameter at a time on the GPU and moves it to host
memory (trainer/run/checkpoint.py ``full_model_state_dict``, ``cpu_offload``), whence it travels to the
generator processes through shared memory (trainer/asynchronous/generator_process.py). Each rollout GPU holds
vLLM's share, ``rollout.vllm_pool_gpu_memory_utilization`` of it (its weights in the rollout dtype, its
key/value cache) and, during a push, the layer
vLLM's in-place reload rebuilds beside its weights before copying it in (the largest parameter, in
the rollout dtype). ``rollout_gpus`` 0 plans the shared GPUs as above.

**Host shared memory** (two pools only): each push travels as one flat copy of the full state dict (a tied
embedding twice, as ``state_dict`` lists it) in the push dtype (``push_dtype``: vLLM's serving dtype) through
/dev/shm, and up to ``pushes_in_shared_memory(η)`` = η + 1 of them can be there at once
(trainer/asynchronous/generator_process.py says why). Ray's object store lives in /dev/shm too, so the plan compares the
pushes with each deploy layout's /dev/shm less its object store (``DEPLOY_SHM_LAYOUTS``) and says which
layouts they do not fit; it does not refuse the run, which may be deployed elsewhere.

The method is checked against a real two-rank CPU run of the same micro-step
(trainer/memory/memory_measurement.py, ``validated``), which imports this module's step, never the
other way round.

Attention: the learner runs packed micro-batches through its packed attention
(trainer/learning/packed_attention.py, chosen as the learner chooses it, by its own constructor), which
never holds a (length × length) tensor, mask or scores. Inside it, SDPA on fake CPU tensors
would pick PyTorch's math kernel, which does hold the scores; the plan and its validation run
SDPA through torch's flash kernel for CPU, whose memory is the GPU kernels' (outputs and
log-sum-exps only).

Why one piece: the shared GPUs and the two pools are one sum over the same parts (the learner's
fake-tensor step, vLLM's share, the CUDA context, the weight push's transients) read from one set of
allowances; the step itself is shared, unchanged, with the measurement and deploy/gpu_check.py.
Split, each layout would carry its own copy of the arithmetic and they would drift.
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
from typing import TYPE_CHECKING, Any, NamedTuple

from trainer.asynchronous.generator_process import push_dtype, pushes_in_shared_memory
from trainer.compute_dtype import resolve_compute_dtype
from trainer.config import ModelSource, RunConfig
from trainer.learning.models import TINY_RANDOM_SHAPE
from trainer.node_layout import (
    CrossNodeTraffic,
    ModelBytes,
    NodeLayout,
    StepShape,
    cross_node_traffic,
    micro_batches_per_rank,
    placement_for,
)
from trainer.ranks import check_world_fits_config
from trainer.staleness import learner_gpus

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


@dataclass(frozen=True)
class WeightPushMemory:
    """What a weight push from the learner pool to the rollout pool adds on their GPUs, in bytes (the module's
    docstring); the weights themselves travel through host memory."""

    largest_parameter_bytes: int  # in the rollout dtype: the layer vLLM's reload rebuilds on a rollout GPU
    largest_master_parameter_bytes: int  # float32: the parameter FSDP gathers on learner rank 0 before it goes to host

    @property
    def rollout_side_bytes(self) -> int:
        return self.largest_parameter_bytes

    @property
    def learner_side_bytes(self) -> int:
        return self.largest_master_parameter_bytes


@dataclass(frozen=True)
class ShmLayout:
    """A deploy layout's /dev/shm on a GPU node, which Ray's object store shares with the weight pushes."""

    name: str
    source: str  # the file that sets both sizes
    shm_bytes: int
    object_store_bytes: int
    fix: str

    @property
    def room_bytes(self) -> int:
        """What is left for the pushes once Ray's object store is full."""
        return self.shm_bytes - self.object_store_bytes


# Copied from the files named; tests/deploy/test_the_memory_plans_shm_sizes_are_the_deploy_layouts.py holds them equal.
DEPLOY_SHM_LAYOUTS = (
    ShmLayout("compose", "deploy/compose/compose.yaml", 80 * GIB, 64 * GIB,
              "raise RAY_SHM_SIZE or lower RAY_OBJECT_STORE_BYTES in deploy/compose/.env"),
    ShmLayout("KubeRay", "deploy/k8s/20-raycluster.yaml", 96 * GIB, 64 * GIB,
              "raise the GPU workers' shm volume sizeLimit or lower their object-store-memory"),
)


@dataclass(frozen=True)
class PushSharedMemory:
    """The weight pushes an asynchronous run holds in host shared memory (/dev/shm) at once, in bytes."""

    push_bytes: int  # one push: the full state dict in ``dtype``
    dtype: str
    live_pushes: int  # pushes_in_shared_memory(η)
    max_staleness: int

    @property
    def total_bytes(self) -> int:
        return self.push_bytes * self.live_pushes

    def fits(self, layout: ShmLayout) -> bool:
        return self.total_bytes <= layout.room_bytes

    def shortfalls(self, layouts: tuple[ShmLayout, ...] = DEPLOY_SHM_LAYOUTS) -> list[str]:
        """One sentence for each layout whose /dev/shm the pushes do not fit: by how much, and what to change."""
        return [
            f"/dev/shm of the {layout.name} layout ({layout.source}): {self.total_bytes / GIB:.1f} GiB of weight "
            f"pushes ({self.live_pushes} × {self.push_bytes / GIB:.2f} GiB in {self.dtype}, η = {self.max_staleness}) "
            f"beside Ray's object store of up to {layout.object_store_bytes / GIB:g} GiB, over its "
            f"{layout.shm_bytes / GIB:g} GiB by {(self.total_bytes - layout.room_bytes) / GIB:.1f} GiB; {layout.fix}, "
            f"or lower rollout.max_staleness"
            for layout in layouts if not self.fits(layout)]


class MemoryProblem(NamedTuple):
    """A part of the plan that does not fit: the setting a person would change first, and why, in words."""

    config_field: str
    message: str


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
    rollout_gpus: int = 0  # the rollout pool of an asynchronous run; 0: every GPU runs both phases in turn
    push: WeightPushMemory | None = None  # planned when rollout_gpus > 0
    host_push: PushSharedMemory | None = None  # planned when rollout_gpus > 0
    cross_node: CrossNodeTraffic | None = None  # planned when a node layout is given (trainer/node_layout.py)

    @property
    def has_pools(self) -> bool:
        return self.rollout_gpus > 0

    @property
    def learner_gpus(self) -> int:
        return self.ranks - self.rollout_gpus

    @property
    def usable_gib(self) -> float:
        return self.gpu_memory_gib * (1 - SPARE_SHARE)

    @property
    def learner_step_peak_gib(self) -> float:
        """The learner step; sharing its GPU with vLLM, it has vLLM's asleep remains beside it."""
        beside = 0.0 if self.has_pools else VLLM_ASLEEP_GIB
        return self.learner.peak_bytes / GIB + CUDA_CONTEXT_GIB + beside

    @property
    def learner_push_gib(self) -> float:
        """Learner rank 0 gathering the weights for a push: its shards and one gathered parameter. 0 without pools."""
        if not self.has_pools:
            return 0.0
        return self.learner.resident_bytes / GIB + CUDA_CONTEXT_GIB + self.push.learner_side_bytes / GIB

    @property
    def learner_peak_gib(self) -> float:
        """The learner's GPUs at their fullest (the learner pool's, with pools)."""
        return max(self.learner_step_peak_gib, self.learner_push_gib)

    @property
    def rollout_peak_gib(self) -> float:
        """The rollout phase's GPUs at their fullest: beside the learner's shards, or alone in the rollout pool."""
        if self.has_pools:
            return CUDA_CONTEXT_GIB + self.vllm.share_bytes / GIB + self.push.rollout_side_bytes / GIB
        return self.learner.resident_bytes / GIB + CUDA_CONTEXT_GIB + self.vllm.share_bytes / GIB

    def problems(self) -> list[MemoryProblem]:
        """Each part that does not fit, by how much, and what to change; empty when all fit."""
        if self.has_pools:
            return self._pool_problems()
        usable = self.usable_gib
        where = (f"the {usable:.1f} GiB a rank may use ({self.gpu_memory_gib:g} GiB GPU, "
                 f"{SPARE_SHARE:.0%} kept spare)")
        found = []
        if self.learner_peak_gib > usable:
            found.append(MemoryProblem(
                "rollout.max_response_tokens",
                f"learner step: {self.learner_peak_gib:.1f} GiB per rank, over {where} by "
                f"{self.learner_peak_gib - usable:.1f} GiB; lower optimizer.micro_batch_tokens or "
                f"optimizer.micro_batch_sequences, shorten rollout.max_response_tokens, or use more GPUs"
            ))
        if self.rollout_peak_gib > usable:
            found.append(MemoryProblem(
                "rollout.vllm_gpu_memory_utilization",
                f"rollout: {self.rollout_peak_gib:.1f} GiB per rank (vLLM's share "
                f"{self.vllm.share_bytes / GIB:.1f} GiB next to the learner's "
                f"{self.learner.resident_bytes / GIB:.1f} GiB of shards), over {where} by "
                f"{self.rollout_peak_gib - usable:.1f} GiB; lower rollout.vllm_gpu_memory_utilization"
            ))
        one_sequence = self.vllm.kv_bytes_per_token * self.vllm.max_model_len
        if self.vllm.kv_cache_bytes < one_sequence:
            short = (one_sequence - self.vllm.kv_cache_bytes) / GIB
            found.append(MemoryProblem(
                "rollout.vllm_gpu_memory_utilization",
                f"rollout: vLLM's share of {self.vllm.share_bytes / GIB:.1f} GiB holds its weights "
                f"({self.vllm.weights_bytes / GIB:.1f} GiB) but not the key/value cache of one "
                f"{self.vllm.max_model_len}-token sequence ({one_sequence / GIB:.1f} GiB): short by {short:.1f} GiB; "
                f"raise rollout.vllm_gpu_memory_utilization or rollout.vllm_tensor_parallel_size"
            ))
        return found

    def _pool_problems(self) -> list[MemoryProblem]:
        """``problems`` of an asynchronous run's two pools, each named."""
        usable = self.usable_gib
        where = f"the {usable:.1f} GiB a GPU may use ({self.gpu_memory_gib:g} GiB GPU, {SPARE_SHARE:.0%} kept spare)"
        learner_pool = f"learner pool ({self.learner_gpus} GPU{'s' if self.learner_gpus != 1 else ''})"
        rollout_pool = f"rollout pool ({self.rollout_gpus} GPU{'s' if self.rollout_gpus != 1 else ''})"
        found = []
        if self.learner_step_peak_gib > usable:
            found.append(MemoryProblem(
                "rollout.max_response_tokens",
                f"{learner_pool}: learner step {self.learner_step_peak_gib:.1f} GiB per GPU, over {where} by "
                f"{self.learner_step_peak_gib - usable:.1f} GiB; lower optimizer.micro_batch_tokens or "
                f"optimizer.micro_batch_sequences, shorten rollout.max_response_tokens, or give the learner more GPUs "
                f"(fewer cluster.rollout_gpus, or more cluster.num_gpus)"))
        if self.learner_push_gib > usable:
            found.append(MemoryProblem(
                "cluster.rollout_gpus",
                f"{learner_pool}: the weight push {self.learner_push_gib:.1f} GiB on learner rank 0 (its "
                f"shards and one gathered parameter), over {where} by "
                f"{self.learner_push_gib - usable:.1f} GiB; give the learner more GPUs (fewer cluster.rollout_gpus)"))
        if self.rollout_peak_gib > usable:
            found.append(MemoryProblem(
                "rollout.vllm_pool_gpu_memory_utilization",
                f"{rollout_pool}: {self.rollout_peak_gib:.1f} GiB per GPU (vLLM's share "
                f"{self.vllm.share_bytes / GIB:.1f} GiB, the layer a weight push rebuilds "
                f"{self.push.rollout_side_bytes / GIB:.1f} GiB), over {where} by "
                f"{self.rollout_peak_gib - usable:.1f} GiB; lower rollout.vllm_pool_gpu_memory_utilization"))
        one_sequence = self.vllm.kv_bytes_per_token * self.vllm.max_model_len
        if self.vllm.kv_cache_bytes < one_sequence:
            short = (one_sequence - self.vllm.kv_cache_bytes) / GIB
            found.append(MemoryProblem(
                "rollout.vllm_pool_gpu_memory_utilization",
                f"{rollout_pool}: vLLM's share of {self.vllm.share_bytes / GIB:.1f} GiB holds its weights "
                f"({self.vllm.weights_bytes / GIB:.1f} GiB) but not the key/value cache of one "
                f"{self.vllm.max_model_len}-token sequence ({one_sequence / GIB:.1f} GiB): short by {short:.1f} GiB; "
                f"raise rollout.vllm_pool_gpu_memory_utilization or "
                f"rollout.vllm_tensor_parallel_size"))
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
        } | ({"pools": {
            "learner": {"gpus": self.learner_gpus, "peak_gib": round(self.learner_peak_gib, 2),
                        "step_gib": round(self.learner_step_peak_gib, 2),
                        "push_gib": round(self.learner_push_gib, 2)},
            "rollout": {"gpus": self.rollout_gpus, "peak_gib": round(self.rollout_peak_gib, 2),
                        "vllm_share_gib": round(self.vllm.share_bytes / GIB, 2),
                        "push_layer_gib": round(self.push.rollout_side_bytes / GIB, 2)},
            "host_shm": {
                "push_gib": round(self.host_push.push_bytes / GIB, 2), "live_pushes": self.host_push.live_pushes,
                "total_gib": round(self.host_push.total_bytes / GIB, 2),
                "layouts": {layout.name: {"shm_gib": layout.shm_bytes / GIB,
                                          "object_store_gib": layout.object_store_bytes / GIB,
                                          "fits": self.host_push.fits(layout)} for layout in DEPLOY_SHM_LAYOUTS}},
        }} if self.has_pools else {}) | ({"cross_node": self.cross_node.as_dict()} if self.cross_node is not None else {})


# --- the model's architecture -------------------------------------------------------------------------


def model_label(config: RunConfig) -> str:
    if config.model.init_checkpoint:
        return config.model.init_checkpoint
    if config.model.source is ModelSource.HUGGINGFACE:
        return config.model.name_or_path
    return config.model.source.value


def architecture_of(config: RunConfig):
    """The model's transformers config (shapes only): a local config.json, or a known model's numbers."""
    from transformers import AutoConfig, LlamaConfig

    folder = config.model.init_checkpoint or (
        config.model.name_or_path if config.model.source is ModelSource.HUGGINGFACE else None)
    if folder and (Path(folder) / "config.json").is_file():
        return AutoConfig.from_pretrained(folder)
    if config.model.source in (ModelSource.TINY_RANDOM, ModelSource.TINY_SMOKE):  # the smoke model is tiny_random fine-tuned
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


class PlanTokenizer:
    """All the learner asks of a tokenizer when it only batches token ids: the padding id."""

    pad_token_id = 0


def full_length_sequences(config: RunConfig):
    """Enough full-length sequences (longest prompt, longest answer) to fill one micro-batch."""
    from trainer.learning.batching import TrainingSequence

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
    from trainer.learning.batching import sequence_tokens

    micro_batches = learner.micro_batches(full_length_sequences(config))
    return max(micro_batches, key=lambda micro: sum(sequence_tokens(s) for s in micro))


def learner_micro_step(learner, micro_batch, after_old_logprobs=lambda: None) -> None:
    """One rank's heaviest moment of a learner step, through the learner's own functions.

    π_old's forward pass (no graph), then the forward and backward pass of the micro-batch
    (the learner's batch layout, log-probabilities and loss) and AdamW's step. The plan runs
    it on fake tensors, the validation for real, deploy/gpu_check.py on a GPU.
    """
    import torch

    from trainer.learning.learner import clipped_token_loss, constant_divisor_loss

    loss_config = learner.config.loss
    batch = learner._batch(micro_batch)
    with torch.no_grad():
        # With the entropy, as Learner.old_logprobs runs it: one more (chunk × vocabulary) buffer at its peak.
        old_logprobs, _ = learner._logprobs(batch, with_entropy=True)  # (B, K)
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

    from trainer.learning.learner import Learner, learner_device

    architecture._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    # Built where the learner will compute (a GPU when the planning machine has one), since it cannot move them:
    # Module.to cannot swap fake parameters (torch 2.13).
    with torch.device(learner_device(config)):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    model.to = lambda *args, **kwargs: model
    return Learner(config, model, PlanTokenizer())


def plan_learner(config: RunConfig, architecture=None) -> LearnerMemory:
    """One rank's learner phase on fake tensors: peak and resident bytes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed._tools.mem_tracker import MemTracker

    architecture = architecture if architecture is not None else architecture_of(config)
    ranks = max(learner_ranks(config), 1)
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


def learner_ranks(config: RunConfig) -> int:
    """The ranks the learner's FSDP shards over: every GPU, or the learner pool when a rollout pool is set apart."""
    return learner_gpus(config) if config.cluster.rollout_gpus > 0 else config.cluster.num_gpus


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
        share_bytes=int(vllm_share(config) * config.cluster.gpu_memory_gib * GIB),
        weights_bytes=weights // tensor_parallel,
        kv_bytes_per_token=kv_per_token,
        max_model_len=longest_prompt + rollout.max_response_tokens,
        tensor_parallel_size=tensor_parallel,
    )


def vllm_share(config: RunConfig) -> float:
    """The share of a GPU vLLM claims: a rollout pool's on GPUs it owns, else the colocated one."""
    rollout = config.rollout
    return rollout.vllm_pool_gpu_memory_utilization if config.cluster.rollout_gpus > 0 else rollout.vllm_gpu_memory_utilization


def plan_weight_push(config: RunConfig, architecture=None) -> WeightPushMemory:
    """The weight push's transients on the GPUs: the largest parameter in the rollout dtype and as float32."""
    import torch
    from transformers import AutoModelForCausalLM

    architecture = architecture if architecture is not None else architecture_of(config)
    dtype = resolve_compute_dtype(config.model.dtype, "cuda").torch_dtype()
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    largest = max(p.numel() for p in model.parameters())
    return WeightPushMemory(largest_parameter_bytes=largest * dtype.itemsize, largest_master_parameter_bytes=largest * 4)


def plan_push_shared_memory(config: RunConfig, architecture=None) -> PushSharedMemory:
    """The pushes in /dev/shm: the state dict as ``packed_weights`` copies it, times the pushes live at once."""
    import torch
    from transformers import AutoModelForCausalLM

    architecture = architecture if architecture is not None else architecture_of(config)
    dtype = push_dtype(config, "cuda") or torch.float32  # None: as the learner keeps them, its float32 masters
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    push = sum(tensor.numel() * (dtype.itemsize if tensor.is_floating_point() else tensor.element_size())
               for tensor in model.state_dict().values())
    staleness = config.rollout.max_staleness
    return PushSharedMemory(push_bytes=push, dtype=str(dtype).removeprefix("torch."),
                            live_pushes=pushes_in_shared_memory(staleness), max_staleness=staleness)


# --- the whole plan -------------------------------------------------------------


def plan(config: RunConfig, *, learner: LearnerMemory | None = None) -> MemoryPlan:
    """The whole plan, not yet validated (trainer/memory/memory_measurement.py does that); ``learner`` stands in
    for the learner's plan when the caller made it already."""
    if config.cluster.num_gpus == 0:
        raise ValueError(f"preset {config.preset!r} runs on CPU (cluster.num_gpus is 0): there is no GPU memory to plan")

    check_world_fits_config(config, learner_gpus(config))  # a run the trainer would refuse is not planned
    architecture = architecture_of(config)
    result = MemoryPlan(
        preset=config.preset, model=model_label(config), max_response_tokens=config.rollout.max_response_tokens,
        ranks=config.cluster.num_gpus, gpu_memory_gib=config.cluster.gpu_memory_gib,
        learner=learner or cached_plan_learner(config), vllm=plan_vllm(config, architecture),
        settings={
            "micro_batch_sequences": config.optimizer.micro_batch_sequences,
            "micro_batch_tokens": config.optimizer.micro_batch_tokens,
            ("vllm_pool_gpu_memory_utilization" if config.cluster.rollout_gpus > 0
             else "vllm_gpu_memory_utilization"): vllm_share(config),
            "vllm_tensor_parallel_size": config.rollout.vllm_tensor_parallel_size,
            "gradient_checkpointing": config.model.gradient_checkpointing,
        },
        rollout_gpus=config.cluster.rollout_gpus,
        push=plan_weight_push(config, architecture) if config.cluster.rollout_gpus > 0 else None,
        host_push=plan_push_shared_memory(config, architecture) if config.cluster.rollout_gpus > 0 else None,
    )
    return result


def learner_plan_key(config: RunConfig) -> str:
    """What the learner's plan depends on: the config fields it reads (not the GPU's size, nor vLLM's
    share) and the versions of the code that makes it. Equal keys, equal plans, so a plan may be
    remembered under its key, in this process or (the platform does) in the database."""
    import torch
    import transformers

    data = config.model_dump(mode="json")
    rollout = {name: value for name, value in data["rollout"].items() if not name.startswith("vllm_")}
    key = {"model": data["model"], "rollout": rollout, "retry": data["retry"],
           "optimizer": data["optimizer"], "loss": data["loss"], "num_gpus": data["cluster"]["num_gpus"],
           "plan_version": LEARNER_PLAN_VERSION, "torch": torch.__version__, "transformers": transformers.__version__}
    if config.cluster.rollout_gpus:  # only then: the keys of runs without a pool stay those already remembered
        key["rollout_gpus"] = config.cluster.rollout_gpus
    return json.dumps(key, sort_keys=True)


@functools.lru_cache(maxsize=32)
def _cached_learner_plan(key: str, config_json: str) -> LearnerMemory:
    return plan_learner(RunConfig.model_validate_json(config_json))


def cached_plan_learner(config: RunConfig) -> LearnerMemory:
    """``plan_learner``, remembered in this process: the launch check asks again for every form submission."""
    return _cached_learner_plan(learner_plan_key(config), config.model_dump_json())


# How a caller gets the learner's plan for a config (``cached_plan_learner``, or the platform's stored plans).
LearnerPlanner = Callable[["RunConfig"], LearnerMemory]


# --- several nodes: what crosses the network --------------------------------------------------------------


def model_bytes(config: RunConfig, architecture=None) -> ModelBytes:
    """The model's size for the cross-node traffic (trainer/node_layout.py), counted from its architecture: its
    parameters (a tied embedding once, as the push sends each parameter once), gathered in the learner's compute
    dtype and pushed in the engines' serving dtype."""
    import torch
    from transformers import AutoModelForCausalLM

    architecture = architecture if architecture is not None else architecture_of(config)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    gather = resolve_compute_dtype(config.model.dtype, "cuda").torch_dtype()
    push = push_dtype(config, "cuda") or torch.float32
    return ModelBytes(parameters, gather.itemsize, push.itemsize,
                      f"the architecture of {model_label(config)}: {parameters:,} parameters, gathered in "
                      f"{str(gather).removeprefix('torch.')}, pushed in {str(push).removeprefix('torch.')}")


def full_length_step_shape(config: RunConfig, learner_ranks: int) -> StepShape:
    """One step at full-length sequences (the longest prompt and answer): the most a step can move, as the memory
    plan plans the heaviest micro-batch."""
    rollout = config.rollout
    prompt = max(rollout.max_prompt_tokens, config.retry.max_prompt_tokens if config.retry.enabled else 0)
    micro = micro_batches_per_rank(config, learner_ranks, prompt + rollout.max_response_tokens)
    return StepShape(
        rollouts=rollout.prompts_per_step * rollout.samples_per_prompt, prompt_tokens=prompt,
        answer_tokens=rollout.max_response_tokens, micro_batches_per_rank=micro, old_logprob_passes_per_rank=micro,
        lean_reach_share=1.0,
        source=(f"config: every sequence at full length ({prompt} + {rollout.max_response_tokens} tokens), "
                f"{micro} micro-batches per learner rank a step, every answer reaching Lean: the most a step moves"))


def plan_cross_node(config: RunConfig, layout: NodeLayout, architecture=None) -> CrossNodeTraffic:
    """What ``config``'s run sends between the nodes of ``layout`` each step (trainer/node_layout.py); LayoutError
    when the layout cannot hold it."""
    placement = placement_for(config, layout)
    shape = full_length_step_shape(config, len(placement.learner_rank_nodes))
    return cross_node_traffic(placement, model_bytes(config, architecture), shape)
