"""Does a run fit its GPUs, and on how few GPUs does a model fit: the memory plan's answers for the launch path and for people.

``check_fits`` is the platform's launch check (a run that would run out of GPU memory is refused
before any GPU is taken, each message keyed by the setting a person would change);
``smallest_fit`` sizes the table of docs/operations/sizing.md (``python -m trainer memory-plan --smallest-fit``).
Both ask trainer/memory/memory_plan.py for the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainer.config import RunConfig
from trainer.memory.memory_plan import (
    CUDA_CONTEXT_GIB,
    GIB,
    SPARE_SHARE,
    VLLM_ASLEEP_GIB,
    ArchitectureUnknown,
    LearnerPlanner,
    MemoryPlan,
    MemoryProblem,
    architecture_of,
    cached_plan_learner,
    model_label,
    plan,
)
from trainer.ranks import rank_rule_problems
from trainer.staleness import asynchronous_layout_refusal

if TYPE_CHECKING:
    from trainer.config import RunConfig


def check_fits(config: RunConfig, *, learner_plan: LearnerPlanner = cached_plan_learner) -> list[str]:
    """Why ``config`` would not fit its GPUs, one message per part over and by how much; empty when it fits.

    An asynchronous run whose η or GPU layout cannot run (trainer/staleness.py) is refused with that
    reason, CPU runs included; otherwise CPU runs (cluster.num_gpus 0) have nothing to check. A run the trainer would refuse at
    start-up for its number of ranks (trainer/loop/distributed.py ``rank_rule_problems``: vLLM's
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


def _fit_problems(config: RunConfig, learner_plan: LearnerPlanner) -> list[MemoryProblem]:
    """Each reason ``config`` cannot run on its GPUs, with the config field a person would change."""
    # η's bound and the two pools first (trainer/staleness.py), on CPU too: a layout that cannot run is not planned.
    refusal = asynchronous_layout_refusal(config)
    if refusal:
        return [MemoryProblem(*refusal)]
    if config.cluster.num_gpus == 0:
        return []
    # The trainer's own start-up rules for its ranks first: a run it would refuse is refused here, unplanned.
    refused = rank_rule_problems(config, config.cluster.num_gpus)
    if refused:
        return [MemoryProblem(config_field, f"ranks: {message}") for config_field, message in refused]
    try:
        return plan(config, learner=learner_plan(config)).problems()
    except ArchitectureUnknown as error:
        return [MemoryProblem("model.name_or_path", f"memory plan: {error}")]


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
    data = config.model_dump(mode="python")
    for section, values in sections.items():
        data[section] = {**data[section], **values}
    return RunConfig.model_validate(data)


def smallest_fit(config: RunConfig) -> Sizing | None:
    """The fewest ranks (then the smallest vLLM tensor parallel size, then the largest vLLM share) that fit.

    The learner's micro-batch stays one full-length sequence (the least a token budget may be);
    rank counts whose AdamW shards alone leave no room are skipped without a fake-tensor run, and
    so are settings the trainer refuses for that many ranks (``rank_rule_problems``: the
    mini-batch must hold a sequence for every rank, the tensor-parallel size must divide them).
    None when even the most ranks tried do not fit.
    """
    import torch
    from transformers import AutoModelForCausalLM

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
                result = plan(sized, learner=learner)
                if result.fits:
                    return Sizing(model_label(config), ranks, budget, tensor_parallel, share, result)
    return None


def allowed_rank_counts(config: RunConfig) -> list[int]:
    """The rank counts ``smallest_fit`` tries: those the trainer accepts ``config``'s mini-batch at."""
    single = _with(config, rollout={"vllm_tensor_parallel_size": 1})
    return [ranks for ranks in RANK_COUNTS
            if not rank_rule_problems(_with(single, cluster={"num_gpus": ranks}), ranks)]


def format_sizing(sizing: Sizing | None, config: RunConfig) -> str:
    if sizing is None:
        most = max(allowed_rank_counts(config), default=1)
        sequences = config.optimizer.mini_batch_prompts * config.rollout.samples_per_prompt
        why = "" if most == RANK_COUNTS[-1] else (
            f"; more ranks than a mini-batch's {sequences} sequences (optimizer.mini_batch_prompts × "
            "rollout.samples_per_prompt) are not tried")
        return f"{model_label(config)}: does not fit even {most} GPUs of {config.cluster.gpu_memory_gib:g} GiB{why}"
    result = sizing.plan
    return (f"| {sizing.model} | {sizing.ranks} | {sizing.micro_batch_tokens:,} | {sizing.vllm_tensor_parallel_size} | "
            f"{sizing.vllm_gpu_memory_utilization:.1f} | {result.learner_peak_gib:.1f} | {result.rollout_peak_gib:.1f} | "
            f"{result.vllm.kv_cache_tokens // result.vllm.max_model_len} |")


SIZING_HEADER = ("| model | GPUs (ranks) | micro_batch_tokens | vLLM tensor parallel | vLLM share | learner GiB/rank | "
                 "rollout GiB/rank | full-length sequences in vLLM's KV cache |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
