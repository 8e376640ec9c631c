"""``python -m trainer memory-plan``: one rank's peak GPU memory for a preset, before any GPU is taken."""

from __future__ import annotations

import argparse
import json
import sys

from trainer.commands.run import add_config_arguments, resolve_config
from trainer.memory import memory_fit, memory_measurement, memory_plan
from trainer.memory.memory_plan import CUDA_CONTEXT_GIB, DEPLOY_SHM_LAYOUTS, GIB, SPARE_SHARE, VLLM_ASLEEP_GIB
from trainer.node_layout import add_node_layout_arguments, format_traffic, node_layout_from, rerun_words

EXIT_BAD_ARGUMENTS = 2
EXIT_DOES_NOT_FIT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help='Print {"preset", "model", "max_response_tokens", "ranks", "gpu_memory_gib", '
                             '"per_rank_peak_gib": {"learner", "rollout"}, "fits", "validated": '
                             '{"predicted_mib", "measured_mib"}}, and "cross_node" with a node layout, instead of '
                             'the table.')
    parser.add_argument("--smallest-fit", action="store_true",
                        help="Instead of planning the configuration as given, find the fewest GPUs (ranks), the vLLM "
                             "tensor parallel size and share with which its model fits; prints a docs/operations/sizing.md "
                             "table row.")
    add_node_layout_arguments(parser)
    parser.add_argument("--no-validate", action="store_true",
                        help="Skip the check of the method against a real CPU measurement (validated is then null).")


def main(args: argparse.Namespace) -> int:
    try:
        config = resolve_config(args)
        if args.smallest_fit:
            sizing = memory_fit.smallest_fit(config)
            print(memory_fit.SIZING_HEADER)
            print(memory_fit.format_sizing(sizing, config))
            return 0 if sizing is not None else EXIT_DOES_NOT_FIT
        layout = node_layout_from(args, config)
        # The layout first: a run it cannot hold is refused before the learner's half-minute plan.
        cross_node = memory_plan.plan_cross_node(config, layout) if layout is not None else None
        result = memory_plan.plan(config)
        result.cross_node = cross_node
        if not args.no_validate:
            result.validated = memory_measurement.validate_on_cpu(config)
    except ValueError as error:  # an invalid --set, a CPU preset, a model the plan does not know
        print(f"memory-plan: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(format_table(result))
        if result.cross_node is not None:
            print("\n" + "\n".join(format_traffic(result.cross_node)))
        print(f"\nrerun: python -m trainer memory-plan --preset {config.preset}"
              + "".join(f" --set {pair}" for pair in args.overrides) + "".join(f" {w}" for w in rerun_words(layout)))
    return 0 if result.fits else EXIT_DOES_NOT_FIT


def format_table(result) -> str:
    """The plan as a table for people (``--json`` prints the contract instead)."""
    if result.has_pools:
        return format_pools_table(result)
    vllm = result.vllm
    learner = result.learner
    lines = [
        f"memory plan: preset {result.preset}, model {result.model}, {result.ranks} rank(s) of "
        f"{result.gpu_memory_gib:g} GiB, answers up to {result.max_response_tokens} tokens",
        f"settings: {', '.join(f'{k}={v}' for k, v in result.settings.items())}",
        "",
        f"{'per rank':<58}{'GiB':>9}",
        f"{'learner step (fake tensors, FSDPMemTracker)':<58}{learner.peak_bytes / GIB:>9.2f}",
        f"{'  of which resident between steps (shards, AdamW)':<58}{learner.resident_bytes / GIB:>9.2f}",
        f"{'  heaviest micro-batch':<58}{learner.micro_batch_sequences:>4} seq, {learner.micro_batch_tokens} tokens",
        f"{'  + CUDA context and NCCL (allowance)':<58}{CUDA_CONTEXT_GIB:>9.2f}",
        f"{'  + vLLM asleep (allowance)':<58}{VLLM_ASLEEP_GIB:>9.2f}",
        f"{'learner phase peak':<58}{result.learner_peak_gib:>9.2f}",
        f"{'rollout: vLLM share (gpu_memory_utilization × GPU)':<58}{vllm.share_bytes / GIB:>9.2f}",
        f"{'  inside it: weights (tensor parallel ' + str(vllm.tensor_parallel_size) + ')':<58}{vllm.weights_bytes / GIB:>9.2f}",
        f"{'  inside it: key/value cache':<58}{vllm.kv_cache_bytes / GIB:>9.2f}"
        f"  ({vllm.kv_cache_tokens:,} tokens, {vllm.kv_cache_tokens // vllm.max_model_len} full sequences)",
        f"{'  + learner resident + CUDA context':<58}{learner.resident_bytes / GIB + CUDA_CONTEXT_GIB:>9.2f}",
        f"{'rollout phase peak':<58}{result.rollout_peak_gib:>9.2f}",
        f"{'usable per rank (' + format(SPARE_SHARE, '.0%') + ' kept spare)':<58}{result.usable_gib:>9.2f}",
    ]
    return "\n".join(lines + _verdict_lines(result))


def _verdict_lines(result) -> list[str]:
    """Whether the plan fits (or each part over), and how its method compared with this CPU's measurement."""
    lines = ["", "fits" if result.fits else "DOES NOT FIT:\n  " + "\n  ".join(p.message for p in result.problems())]
    if result.validated:
        predicted, measured = result.validated["predicted_mib"], result.validated["measured_mib"]
        lines.append(f"validated on this CPU: predicted {predicted:.1f} MiB, measured {measured:.1f} MiB "
                     f"({predicted / measured - 1:+.0%}); {result.validated['what']}")
    return lines


def format_pools_table(result) -> str:
    """An asynchronous run's two pools, each GPU's peak (trainer/memory/memory_plan.py's module docstring)."""
    vllm, learner, push = result.vllm, result.learner, result.push
    lines = [
        f"memory plan: preset {result.preset}, model {result.model}, {result.ranks} GPUs of {result.gpu_memory_gib:g} GiB "
        f"in two pools ({result.learner_gpus} learner, {result.rollout_gpus} rollout), answers up to "
        f"{result.max_response_tokens} tokens",
        f"settings: {', '.join(f'{k}={v}' for k, v in result.settings.items())}",
        "",
        f"{'per GPU':<58}{'GiB':>9}",
        f"learner pool: {result.learner_gpus} GPUs, FSDP2 over {result.learner_gpus} ranks, no vLLM",
        f"{'  learner step (fake tensors, FSDPMemTracker)':<58}{learner.peak_bytes / GIB:>9.2f}",
        f"{'    of which resident between steps (shards, AdamW)':<58}{learner.resident_bytes / GIB:>9.2f}",
        f"{'    heaviest micro-batch':<58}{learner.micro_batch_sequences:>4} seq, {learner.micro_batch_tokens} tokens",
        f"{'  + CUDA context and NCCL (allowance)':<58}{CUDA_CONTEXT_GIB:>9.2f}",
        f"{'  learner step peak':<58}{result.learner_step_peak_gib:>9.2f}",
        f"{'  rank 0 gathering a push: resident + context':<58}{learner.resident_bytes / GIB + CUDA_CONTEXT_GIB:>9.2f}",
        f"{'    + largest parameter gathered (float32), then to host':<58}{push.learner_side_bytes / GIB:>9.2f}",
        f"{'  rank 0 push peak':<58}{result.learner_push_gib:>9.2f}",
        f"{'learner pool peak':<58}{result.learner_peak_gib:>9.2f}",
        f"rollout pool: {result.rollout_gpus} GPUs, vLLM engines of tensor parallel {vllm.tensor_parallel_size}, "
        "no learner",
        f"{'  vLLM share (vllm_pool_gpu_memory_utilization × GPU)':<58}{vllm.share_bytes / GIB:>9.2f}",
        f"{'    inside it: weights':<58}{vllm.weights_bytes / GIB:>9.2f}",
        f"{'    inside it: key/value cache':<58}{vllm.kv_cache_bytes / GIB:>9.2f}"
        f"  ({vllm.kv_cache_tokens:,} tokens, {vllm.kv_cache_tokens // vllm.max_model_len} full sequences)",
        f"{'  + push: the layer vLLM rebuilds (largest parameter)':<58}{push.rollout_side_bytes / GIB:>9.2f}",
        f"{'  + CUDA context and NCCL (allowance)':<58}{CUDA_CONTEXT_GIB:>9.2f}",
        f"{'rollout pool peak':<58}{result.rollout_peak_gib:>9.2f}",
        f"{'usable per GPU (' + format(SPARE_SHARE, '.0%') + ' kept spare)':<58}{result.usable_gib:>9.2f}",
    ]
    return "\n".join(lines + _verdict_lines(result) + _shared_memory_lines(result.host_push))


def _shared_memory_lines(host_push) -> list[str]:
    """The pushes in the node's /dev/shm against each deploy layout's (trainer/memory/memory_plan.py's module docstring)."""
    lines = [
        "",
        f"{'host shared memory (/dev/shm) of the node, for the pushes':<58}{'GiB':>9}",
        f"{'  one push: the full state dict in ' + host_push.dtype:<58}{host_push.push_bytes / GIB:>9.2f}",
        f"{'  × pushes live at once (η = ' + str(host_push.max_staleness) + ' waiting, 1 loading)':<58}"
        f"{host_push.live_pushes:>9}",
        f"{'  pushes in /dev/shm':<58}{host_push.total_bytes / GIB:>9.2f}",
    ]
    for layout in DEPLOY_SHM_LAYOUTS:
        verdict = "fits" if host_push.fits(layout) else "DOES NOT FIT"
        lines.append(f"  {layout.name} ({layout.source}): {layout.shm_bytes / GIB:g} GiB /dev/shm − "
                     f"{layout.object_store_bytes / GIB:g} GiB Ray object store = {layout.room_bytes / GIB:g} GiB: {verdict}")
    return lines + [f"  {shortfall}" for shortfall in host_push.shortfalls()]
