"""GPU configurations small enough to plan in seconds: the tiny random model, sharded over two fake ranks."""

from __future__ import annotations

from trainer.config import RunConfig

TINY_GPU_SECTIONS = {
    "model": {"source": "tiny_random", "name_or_path": "tiny-random-llama"},
    "rollout": {"max_prompt_tokens": 64, "max_response_tokens": 192, "prompts_per_step": 32},
    "retry": {"max_prompt_tokens": 64},
    "optimizer": {"micro_batch_tokens": 512},
    "cluster": {"num_gpus": 2, "gpu_memory_gib": 40.0},
}


def tiny_gpu_sections(**changes: dict) -> dict:
    """The tiny GPU run's settings by section, with ``changes`` merged into their sections."""
    merged = {section: dict(values) for section, values in TINY_GPU_SECTIONS.items()}
    for section, values in changes.items():
        merged.setdefault(section, {}).update(values)
    return merged


def tiny_gpu_config(**changes: dict) -> RunConfig:
    """The h100x8 preset around the tiny random model and short answers; ``changes`` override per section."""
    return RunConfig.from_preset("h100x8", tiny_gpu_sections(**changes))


def two_pools(**changes: dict) -> RunConfig:
    """An asynchronous run of 4 GPUs of 40 GiB: 2 learn, 2 generate, η 1; ``changes`` override per section."""
    rollout = {"max_staleness": 1, **changes.pop("rollout", {})}
    cluster = {"num_gpus": 4, "rollout_gpus": 2, **changes.pop("cluster", {})}
    return tiny_gpu_config(rollout=rollout, cluster=cluster, **changes)
