"""GPU configurations small enough to plan in seconds: the tiny random model, sharded over two fake ranks."""

from __future__ import annotations

import subprocess
import sys

from deploy.services import REPO_DIR
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


def memory_plan_of_eight_tiny_gpus(*settings: str) -> str:
    """What ``python -m trainer memory-plan`` prints for the h100x8 preset around the tiny random model and short
    answers on its eight GPUs, given 40 GiB each, with ``settings`` ("section.field=value") on top."""
    tiny = ["model.source=tiny_random", "rollout.max_prompt_tokens=64", "retry.max_prompt_tokens=64",
            "rollout.max_response_tokens=192", "optimizer.micro_batch_tokens=512", "cluster.gpu_memory_gib=40"]
    argv = [sys.executable, "-m", "trainer", "memory-plan", "--preset", "h100x8", "--no-validate"]
    for setting in [*tiny, *settings]:
        argv += ["--set", setting]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=REPO_DIR, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
