"""The precision a run computes in: ``model.dtype``, with ``auto`` resolved for the machine it runs on.

Why this exists: on a CPU without bfloat16 instructions (AVX2 only), torch computes a bfloat16
matrix product in a slow fallback, many times slower than float32; on a CPU that has them
(AVX512-BF16, AMX), bfloat16 is the faster one (figures: docs/benchmarks/history.md). So the CPU
presets ask for ``auto``: bfloat16 where the CPU computes it fast, float32 elsewhere.

The rule reads torch's own report of the CPU (``cpu_report``), never a timing:

- bfloat16 needs the instructions: ``torch.cpu._is_avx512_bf16_supported()`` or
  ``torch.cpu._is_amx_tile_supported()`` (both read CPUID; x86 only);
- and the kernels allowed to use them: ATen's vector capability
  (``torch.backends.cpu.get_cpu_capability()``, lowered by ``ATEN_CPU_CAPABILITY``) must be
  AVX512 or above, and oneDNN, which runs the matrix products, must not be capped below
  ``AVX512_CORE_BF16`` (``ONEDNN_MAX_CPU_ISA``, or its older name ``DNNL_MAX_CPU_ISA``). CPUID
  still reports the instructions under such a cap, and under it bfloat16 runs as slowly as on an
  AVX2-only CPU (benchmarks/cpu_rollout_precision.py; figures in docs/benchmarks).

A run that names ``float32`` or ``bfloat16`` gets it; bfloat16 where the rule would not choose
it comes with a warning (``ComputeDtype.warning``). On a GPU, ``auto`` is bfloat16 where the GPU
supports it (every GPU the h100x8 preset targets). The resolution runs in the process that
computes (the trainer on its Ray worker, the warm-start builder), once, and is cached.

Light to import: torch is imported inside the functions that need it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import asdict, dataclass
from typing import Literal

DtypeName = Literal["float32", "bfloat16"]
AUTO = "auto"

# ATen capabilities whose vector kernels include AVX512's bfloat16 conversions.
_ATEN_CAPABILITIES_WITH_AVX512 = frozenset({"AVX512"})
# oneDNN ISA caps (its ONEDNN_MAX_CPU_ISA names) at or above the level that uses bfloat16 instructions.
_ONEDNN_CAPS_WITH_BF16 = frozenset({
    "AVX512_CORE_BF16", "AVX512_CORE_FP16", "AVX10_1_512", "AVX512_CORE_AMX", "AVX10_1_512_AMX",
    "AVX512_CORE_AMX_FP16", "AVX10_1_512_AMX_FP16", "AVX10_2_512", "AVX10_2_512_AMX_2", "ALL", "DEFAULT",
})
ONEDNN_CAP_VARIABLES = ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")


@dataclass(frozen=True)
class CpuReport:
    """What torch and the environment say about this CPU's bfloat16 arithmetic."""

    capability: str  # torch.backends.cpu.get_cpu_capability(): "AVX2", "AVX512", "DEFAULT", ...
    has_avx512_bf16: bool
    has_amx_tile: bool
    onednn_cap: str | None  # ONEDNN_MAX_CPU_ISA as set, upper-cased; None when oneDNN is not capped


@dataclass(frozen=True)
class ComputeDtype:
    """The resolved precision: what was asked, what was chosen, and why, in words a run page can show."""

    requested: str  # "auto", "float32" or "bfloat16"
    dtype: DtypeName
    reason: str  # "this CPU has no bfloat16 instructions (torch reports AVX2)"
    warning: str | None = None  # set where the choice will be slow

    @property
    def sentence(self) -> str:
        """"computes in float32: this CPU has no bfloat16 instructions (torch reports AVX2)"."""
        return f"computes in {self.dtype}: {self.reason}"

    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def to_json_dict(self) -> dict:
        """As run_started carries it; ``sentence`` too, so pages show the trainer's own words."""
        return {**asdict(self), "sentence": self.sentence}


def cpu_report() -> CpuReport:
    """torch's report of this CPU (the one function the rule reads; tests replace it)."""
    import torch

    cap = next((os.environ[name] for name in ONEDNN_CAP_VARIABLES if os.environ.get(name)), None)
    return CpuReport(
        capability=torch.backends.cpu.get_cpu_capability(),
        has_avx512_bf16=bool(torch.cpu._is_avx512_bf16_supported()),
        has_amx_tile=bool(torch.cpu._is_amx_tile_supported()),
        onednn_cap=cap.strip().upper() if cap else None,
    )


def cpu_bfloat16_verdict(report: CpuReport) -> tuple[bool, str]:
    """(is bfloat16 fast here, why): the rule of this module, on a report."""
    if report.has_amx_tile:
        instructions = "AMX tiles"
    elif report.has_avx512_bf16:
        instructions = "AVX512-BF16 instructions"
    else:
        return False, f"this CPU has no bfloat16 instructions (torch reports {report.capability})"
    caps = []
    if report.capability not in _ATEN_CAPABILITIES_WITH_AVX512:
        caps.append(f"torch's kernels are limited to {report.capability} (ATEN_CPU_CAPABILITY)")
    if report.onednn_cap is not None and report.onednn_cap not in _ONEDNN_CAPS_WITH_BF16:
        caps.append(f"oneDNN is capped to {report.onednn_cap} (ONEDNN_MAX_CPU_ISA)")
    if caps:
        return False, f"this CPU has {instructions}, but {' and '.join(caps)}, which computes bfloat16 slowly"
    return True, f"this CPU has {instructions}"


def _gpu_bfloat16_verdict() -> tuple[bool, str]:
    import torch

    if torch.cuda.is_available() and not torch.cuda.is_bf16_supported():
        return False, f"this GPU ({torch.cuda.get_device_name()}) has no bfloat16 arithmetic"
    # Planning for GPUs that are not here (memory-plan on a laptop) assumes the recipe's H100s.
    return True, "the GPU computes bfloat16 natively"


@functools.lru_cache(maxsize=None)
def resolve_compute_dtype(requested: str, device_type: Literal["cpu", "cuda"] = "cpu") -> ComputeDtype:
    """``model.dtype`` as this process will compute it; cached, so every part of a run agrees."""
    if requested not in (AUTO, "float32", "bfloat16"):
        raise ValueError(f"model.dtype {requested!r} is not a precision; choose auto, float32 or bfloat16")
    is_fast, why = _gpu_bfloat16_verdict() if device_type == "cuda" else cpu_bfloat16_verdict(cpu_report())
    if requested == AUTO:
        return ComputeDtype(AUTO, "bfloat16" if is_fast else "float32", why)
    if requested == "bfloat16" and not is_fast:
        return ComputeDtype(requested, "bfloat16", f"the run asks for bfloat16; {why}",
                            warning=(f"model.dtype=bfloat16 will be slow here: {why} (a 1024² matmul ran ~75× "
                                     "slower than in float32 on such a CPU). Set model.dtype=auto or float32."))
    return ComputeDtype(requested, requested, f"the run asks for {requested}" + ("" if requested == "float32" else f"; {why}"))


def compute_dtype_of(config, device_type: Literal["cpu", "cuda"] | None = None) -> ComputeDtype:
    """The run's resolved precision; the device is the one the learner uses (GPU when ``cluster.num_gpus``)."""
    if device_type is None:
        import torch

        device_type = "cuda" if config.cluster.num_gpus > 0 and torch.cuda.is_available() else "cpu"
    return resolve_compute_dtype(config.model.dtype, device_type)
