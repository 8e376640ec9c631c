"""model.dtype=auto computes in bfloat16 only on a CPU with bfloat16 instructions (AVX512-BF16, AMX)
that torch's kernels may use, and in float32 elsewhere (trainer/compute_dtype.py; issue 26: bfloat16
on an AVX2-only CPU ran ~60× slower). The tests replace torch's report of the CPU, never its arithmetic."""

from __future__ import annotations

import pytest
import torch

from tests.learning.conftest import tiny_run_config
from trainer import compute_dtype
from trainer.compute_dtype import CpuReport, compute_dtype_of, cpu_report, resolve_compute_dtype
from trainer.config import RunConfig
from trainer.learning.learner import Learner
from trainer.rollout.engines import build_engine
from trainer.rollout.replica import ReplicaRolloutEngine
from trainer.rollout.transformers_engine import TransformersEngine

AVX2_ONLY = CpuReport(capability="AVX2", has_avx512_bf16=False, has_amx_tile=False, onednn_cap=None)
AVX512_BF16 = CpuReport(capability="AVX512", has_avx512_bf16=True, has_amx_tile=False, onednn_cap=None)
AMX = CpuReport(capability="AVX512", has_avx512_bf16=True, has_amx_tile=True, onednn_cap=None)


@pytest.fixture(autouse=True)
def fresh_resolution():
    resolve_compute_dtype.cache_clear()  # resolved once per process: each test resolves for its own CPU
    yield
    resolve_compute_dtype.cache_clear()


@pytest.fixture
def cpu_reports(monkeypatch):
    def report_as(report: CpuReport) -> None:
        monkeypatch.setattr(compute_dtype, "cpu_report", lambda: report)
        resolve_compute_dtype.cache_clear()
    return report_as


def test_a_cpu_that_torch_reports_as_avx2_computes_in_float32(cpu_reports):
    cpu_reports(AVX2_ONLY)
    resolved = resolve_compute_dtype("auto")
    assert resolved.dtype == "float32" and resolved.warning is None
    assert resolved.sentence == "computes in float32: this CPU has no bfloat16 instructions (torch reports AVX2)"


def test_a_cpu_with_avx512_bf16_computes_in_bfloat16(cpu_reports):
    cpu_reports(AVX512_BF16)
    assert resolve_compute_dtype("auto").sentence == "computes in bfloat16: this CPU has AVX512-BF16 instructions"


def test_a_cpu_with_amx_computes_in_bfloat16(cpu_reports):
    cpu_reports(AMX)
    assert resolve_compute_dtype("auto").sentence == "computes in bfloat16: this CPU has AMX tiles"


@pytest.mark.parametrize("cap", ["AVX2", "avx512_core", "AVX512_CORE_VNNI"])
def test_onednn_capped_below_bfloat16_computes_in_float32_though_the_cpu_has_the_instructions(cap, monkeypatch):
    # The real report, read from the environment as oneDNN reads it: CPUID still says AVX512-BF16.
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX512")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", cap)
    assert cpu_report().onednn_cap == cap.upper()
    resolved = resolve_compute_dtype("auto")
    assert resolved.dtype == "float32"
    assert f"oneDNN is capped to {cap.upper()}" in resolved.reason


@pytest.mark.parametrize("cap", ["AVX512_CORE_BF16", "AVX512_CORE_AMX", "ALL"])
def test_onednn_capped_at_or_above_bfloat16_still_computes_in_bfloat16(cap, cpu_reports):
    cpu_reports(CpuReport(capability="AVX512", has_avx512_bf16=True, has_amx_tile=False, onednn_cap=cap))
    assert resolve_compute_dtype("auto").dtype == "bfloat16"


def test_aten_limited_to_avx2_computes_in_float32_though_the_cpu_has_the_instructions(cpu_reports):
    cpu_reports(CpuReport(capability="AVX2", has_avx512_bf16=True, has_amx_tile=False, onednn_cap=None))
    resolved = resolve_compute_dtype("auto")
    assert resolved.dtype == "float32" and "ATEN_CPU_CAPABILITY" in resolved.reason


def test_a_run_that_asks_for_bfloat16_on_an_avx2_cpu_gets_it_with_a_warning(cpu_reports):
    cpu_reports(AVX2_ONLY)
    resolved = resolve_compute_dtype("bfloat16")
    assert resolved.dtype == "bfloat16"
    assert "slow" in resolved.warning and "model.dtype=auto or float32" in resolved.warning


def test_a_run_that_asks_for_float32_on_a_bfloat16_cpu_gets_it_without_a_warning(cpu_reports):
    cpu_reports(AMX)
    resolved = resolve_compute_dtype("float32")
    assert (resolved.dtype, resolved.warning) == ("float32", None)


def test_asking_for_bfloat16_where_it_is_fast_warns_of_nothing(cpu_reports):
    cpu_reports(AVX512_BF16)
    assert resolve_compute_dtype("bfloat16").warning is None


def test_the_cpu_presets_ask_for_auto_and_the_gpu_preset_for_bfloat16():
    assert RunConfig.from_preset("cpu-demo").model.dtype == "auto"
    assert RunConfig.from_preset("cpu-smoke").model.dtype == "auto"
    assert RunConfig.from_preset("h100x8").model.dtype == "bfloat16"


def test_the_resolution_is_made_once_per_process(cpu_reports):
    cpu_reports(AVX2_ONLY)
    first = compute_dtype_of(tiny_run_config(model={"dtype": "auto"}))
    cpu_reports(AVX512_BF16)  # clears the cache: a changed report is seen...
    assert compute_dtype_of(tiny_run_config(model={"dtype": "auto"})).dtype == "bfloat16" != first.dtype
    calls = []
    original = compute_dtype.cpu_report
    compute_dtype.cpu_report = lambda: calls.append(1) or original()
    try:
        for _ in range(3):  # ...but within a run the first answer stands, unasked again
            compute_dtype_of(tiny_run_config(model={"dtype": "auto"}))
    finally:
        compute_dtype.cpu_report = original
    assert calls == []


def test_on_an_avx2_cpu_the_learner_and_the_rollouts_compute_in_float32(cpu_reports, tiny_policy):
    cpu_reports(AVX2_ONLY)
    config = tiny_run_config(model={"dtype": "auto"})
    model, tokenizer = tiny_policy()
    learner = Learner(config, model, tokenizer)
    assert learner.compute_dtype == torch.float32
    assert isinstance(build_engine(config, model, tokenizer), TransformersEngine)  # the learner's own float32 module


def test_on_a_bfloat16_cpu_the_learner_and_the_rollouts_compute_in_bfloat16(cpu_reports, tiny_policy):
    cpu_reports(AVX512_BF16)
    config = tiny_run_config(model={"dtype": "auto"})
    model, tokenizer = tiny_policy()
    learner = Learner(config, model, tokenizer)
    assert learner.compute_dtype == torch.bfloat16
    engine = build_engine(config, model, tokenizer)
    assert isinstance(engine, ReplicaRolloutEngine)
    assert {p.dtype for p in engine.replica.parameters()} == {torch.bfloat16}
