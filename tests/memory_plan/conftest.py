"""GPU configurations small enough to plan in seconds: the tiny random model, sharded over two fake ranks."""

from __future__ import annotations

from trainer.config import RunConfig


def tiny_gpu_config(**sections) -> RunConfig:
    """The h100x8 preset around the tiny random model and short answers; ``sections`` override per section."""
    base = {
        "model": {"source": "tiny_random", "name_or_path": "tiny-random-llama"},
        "rollout": {"max_prompt_tokens": 64, "max_response_tokens": 192, "prompts_per_step": 32},
        "retry": {"max_prompt_tokens": 64},
        "optimizer": {"micro_batch_tokens": 512},
        "cluster": {"num_gpus": 2, "gpu_memory_gib": 40.0},
    }
    for section, values in sections.items():
        base.setdefault(section, {}).update(values)
    return RunConfig.from_preset("h100x8", base)
