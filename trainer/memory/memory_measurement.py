"""The memory plan checked against a measurement: the same learner micro-step, on fake tensors and for real.

Every plan (trainer/memory/memory_plan.py) is only as good as its method, so ``python -m trainer
memory-plan`` checks it (``validated``): the micro-step of a Qwen3-shaped model of 4 layers of
hidden 512 (about 30M parameters, a 32,768-token vocabulary), one micro-batch of four packed
sequences, 2,048 tokens, in the run's dtype (float32 on a CPU without bfloat16 instructions, which
would emulate it twenty times slower) with activation checkpointing, over 2 ranks under
FSDP2: once on fake tensors (rank 0 of a fake group of 2), once for real as 2 CPU processes in a
gloo group on this machine (``python -m trainer.memory.memory_measurement measure``, one per rank), each
rank's real peak read from the operating system (its resident high-water mark above what it held
after its imports and process-group start-up, the larger of the two ranks). ``validated["what"]``
says all that in words, with the machine's cores and load average. It validates the method at
that size, not the ``h100x8`` run itself: no GPU measured it.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer.compute_dtype import cpu_bfloat16_verdict, cpu_report, resolve_compute_dtype
from trainer.config import RunConfig
from trainer.memory.memory_plan import (
    MIB,
    LearnerMemory,
    PlanTokenizer,
    fused_attention,
    heaviest_micro_batch,
    learner_micro_step,
    plan_learner,
    transformers_config,
    warm_optimizer,
)

if TYPE_CHECKING:
    from trainer.config import RunConfig

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


def validation_dtype(config: RunConfig) -> tuple[str, str]:
    """(the dtype the validation computes in, why): the run's GPU dtype where this CPU computes it natively.

    The plan's method is the same in every dtype (its fake tensors carry it), so on a CPU that would emulate
    bfloat16 (AVX2 only: about six minutes instead of twenty seconds for the step) the check runs in float32."""
    planned = resolve_compute_dtype(config.model.dtype, "cuda").dtype
    is_fast, why = cpu_bfloat16_verdict(cpu_report())
    if planned == "bfloat16" and not is_fast:
        return "float32", f"float32 compute (not the run's bfloat16: {why})"
    return planned, f"{planned} compute"


def validation_config(config: RunConfig) -> RunConfig:
    """``config`` at a size this machine runs for real: 2 ranks, the validation's model, four 512-token sequences.

    The run's optimizer settings stay, and its dtype where this CPU computes it natively (``validation_dtype``);
    activation checkpointing is on, as the plan's recipe runs it; the micro-batch is one of
    ``VALIDATION_MICRO_BATCH_TOKENS`` packed tokens.
    """
    data = config.model_dump(mode="python")
    # The learner's method is what is checked: two ranks of learner, without an asynchronous run's rollout pool.
    data["cluster"] = {**data["cluster"], "num_gpus": VALIDATION_RANKS, "rollout_gpus": 0}
    data["model"] = {**data["model"], "gradient_checkpointing": True, "dtype": validation_dtype(config)[0]}
    data["rollout"] = {**data["rollout"], "engine": "transformers", "vllm_tensor_parallel_size": 1, "max_staleness": 0,
                       **VALIDATION_LENGTHS}
    data["retry"] = {**data["retry"], "max_prompt_tokens": VALIDATION_LENGTHS["max_prompt_tokens"]}
    data["optimizer"] = {**data["optimizer"], "micro_batch_tokens": VALIDATION_MICRO_BATCH_TOKENS}
    return RunConfig.model_validate(data)


def describe_validation(config: RunConfig, planned: LearnerMemory, dtype_why: str) -> str:
    """``validated["what"]``: the model, its tokens and ranks, and the machine, in words."""
    import torch
    from transformers import AutoModelForCausalLM

    architecture = transformers_config(*VALIDATION_ARCHITECTURE)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    return (f"Qwen3-shaped model, {architecture.num_hidden_layers} layers of hidden {architecture.hidden_size}, "
            f"vocabulary {architecture.vocab_size:,}, {parameters / 1e6:.1f}M parameters, {dtype_why}, "
            f"float32 master weights, activation checkpointing; one micro-batch of "
            f"{planned.micro_batch_sequences} packed sequences, {planned.micro_batch_tokens:,} tokens; "
            f"{VALIDATION_RANKS} ranks under FSDP2 (gloo, one CPU process each); measured: the larger rank's "
            f"resident high-water mark above what it held after its imports and process-group start-up; "
            f"predicted: rank 0 of the plan's fake-tensor run; machine: {os.cpu_count()} CPU cores, load average "
            f"{load} (1, 5, 15 min) when it ran. A validation of the method at this size, not of a GPU run")


def validate_on_cpu(config: RunConfig) -> dict[str, Any]:
    """The plan's method against a measurement: the same micro-step, fake and real, of the validation's model, 2 ranks.

    Each real rank is a fresh process (``python -m trainer.memory.memory_measurement measure``), so what this
    one already allocated does not blur the reading.
    """
    small = validation_config(config)
    planned = plan_learner(small, transformers_config(*VALIDATION_ARCHITECTURE))
    measured = max(rank["peak_bytes"] for rank in measure_ranks(small))
    return {"predicted_mib": round(planned.peak_bytes / MIB, 1), "measured_mib": round(measured / MIB, 1),
            "what": describe_validation(small, planned, validation_dtype(config)[1])}


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
    root = Path(__file__).resolve().parents[2]  # the repository, so the ranks import trainer
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
            processes.append((subprocess.Popen([sys.executable, "-m", "trainer.memory.memory_measurement", "measure"], stdin=stdin,
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

    import trainer.learning.learner  # noqa: F401  (loaded before the reading, not used by name)

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

    from trainer.learning.learner import Learner

    architecture = architecture if architecture is not None else transformers_config(*VALIDATION_ARCHITECTURE)
    architecture._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    return Learner(config, model, PlanTokenizer())


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


def _measure_main() -> int:
    """``python -m trainer.memory.memory_measurement measure`` < config JSON: the validation's real run, in its own process."""
    import sys

    config = RunConfig.model_validate(json.loads(sys.stdin.read()))
    print(json.dumps({"rank": int(os.environ.get("RANK", "0")), "peak_bytes": measure_real_step(config)}))
    return 0


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["measure"]:
        sys.exit("usage: python -m trainer.memory.memory_measurement measure < config.json (the plan's validation; "
                 "people want `python -m trainer memory-plan`)")
    sys.exit(_measure_main())
