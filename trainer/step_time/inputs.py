"""Each preset's inputs to the step-time model, each with where it came from, and the device layout per η.

Kinds of source, as every figure here names one:

- ``config``: the run's own configuration (``--set`` changes it).
- ``measured``: a run on this project's machine, read from its events file by ``calibration.fit_inputs``
  (``python -m trainer step-time --calibrate FILE`` prints the same fit); never copied by hand, so the
  figures cannot drift from their file.
- ``published``: a public source, cited.
- ``assumed``: no source found; the figure is ours and is labelled as a guess.

A step time the model computes from these is a prediction, and says so wherever it is printed.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from trainer.command_line import EXIT_MISSING_FILE, CommandError
from trainer.node_layout import (
    FSDP_COLLECTIVES,
    SCORED_BATCH,
    WEIGHT_PUSH,
    CrossNodeTraffic,
    ModelBytes,
    StepShape,
    micro_batches_per_rank,
)
from trainer.step_time.calibration import fit_inputs, read_events
from trainer.step_time.simulation import (
    SHARED_CPU_NOTE,
    AnswerLengths,
    LeanLatency,
    Layout,
    StepTimeInputs,
    sequence_work,
)

REPOSITORY = Path(__file__).resolve().parents[2]

# The measured runs the CPU presets' inputs are fitted from (one per preset; see MEASURED_RUNS' docstrings).
MEASURED_RUNS = {
    # The synchronous cpu-demo run of the README's demo curve: SmolLM2-135M, 20 steps of 16 rollouts,
    # transformers engine, stand-in Lean with no latency.
    "cpu-demo": "docs/demo-curve-events.jsonl",
    # A synchronous cpu-smoke run of 6 steps against the stand-in at --latency-ms 1500, made by
    # benchmarks/step_time_cpu_smoke_events.py (the tiny random model: every answer fails the format
    # check, so none reaches Lean).
    "cpu-smoke": "docs/step-time/cpu-smoke-sync-events.jsonl",
}

# The recipe's own pace, to set beside the prediction for h100x8.
RECIPE_STEP_MINUTES = 48 * 60 / 85
RECIPE_STEP_SOURCE = ("published: the Kimina-Prover-RL release trained about 85 steps in 48 hours on 8×H100, "
                      "about 34 minutes a step (https://huggingface.co/blog/AI-MO/kimina-prover-rl, as issue 25 quotes it)")

# h100x8: Kimina-Prover-Distill-1.7B (Qwen3-1.7B) on 8×H100 80 GB.
H100_BF16_DENSE_FLOPS = 989.4e12  # NVIDIA H100 SXM datasheet: 989 TFLOPS BF16 dense (1,979 with sparsity)
QWEN3_1_7B_PARAMETERS = 1.7e9  # Qwen3-1.7B's model card: 1.7B parameters (1.4B without the embeddings)
# Per token: forward for π_old (2N), forward and backward (6N), the checkpointed forward again (2N).
LEARNER_FLOPS_PER_TOKEN = 10 * QWEN3_1_7B_PARAMETERS
# Qwen3-1.7B's config.json: 28 layers, 16 query heads of 128. Causal attention's forward costs 2 × layers × width
# FLOPs per token per token of the sequence (QKᵀ and AV over half of it on average), against 2N for the rest.
QWEN3_1_7B_ATTENTION_PER_CONTEXT_TOKEN = 28 * 16 * 128 / QWEN3_1_7B_PARAMETERS
# deploy/gpu_check.py's learner steps on one H200, whose BF16 dense peak is the H100 SXM's (989 TFLOPS).
GPU_CHECKS = "docs/operations/gpu-checks"
GPU_CHECK_SEQUENCE = (8192, 24576)  # the recipe's lengths, gpu_check.py's default: (prompt, response) tokens
H100_TPOT_S = 0.0346  # gpustack's H100 vLLM measurement, below
# One H100's vLLM key/value cache: `python -m trainer memory-plan --preset h100x8` prints "inside it: key/value
# cache 42.80 GiB (400,660 tokens, 12 full sequences)" (vllm_gpu_memory_utilization 0.6 of 80 GiB). The plan
# needs torch; this model does not, so its figure is quoted here: rerun the command when the plan changes.
H100X8_KV_CACHE_TOKENS = 400_660
KV_CACHE_SOURCE = ("the memory plan's key/value cache of one H100, 400,660 tokens "
                   "(`python -m trainer memory-plan --preset h100x8`)")


def h100x8_inputs(config) -> StepTimeInputs:
    """Published figures where there are any; the rest assumed, and labelled so."""
    rollout, verifier = config.rollout, config.verifier
    answer_mean, answer_sigma = 8000.0, 0.7
    prompt_mean = 400.0
    kv_tokens = H100X8_KV_CACHE_TOKENS
    concurrent = max(1, min(256, int(kv_tokens // (prompt_mean + answer_mean))))
    utilisation, measured = measured_learner_utilisation()
    learner_rate = H100_BF16_DENSE_FLOPS * utilisation / LEARNER_FLOPS_PER_TOKEN
    return StepTimeInputs(
        rollouts_per_step=rollout.prompts_per_step * rollout.samples_per_prompt,
        answer_tokens=AnswerLengths(answer_mean, answer_sigma, rollout.max_response_tokens),
        decode_tokens_per_s_per_sequence=1 / H100_TPOT_S,
        concurrent_sequences_per_device=concurrent,
        prefill_s=5.0,
        lean_latency=LeanLatency(mean_s=5.0, sigma=1.0, timeout_share=0.02),
        lean_timeout_s=verifier.timeout_s,
        lean_max_in_flight=verifier.max_in_flight,
        lean_reach_share=0.9,
        learner_tokens_per_s_per_device=learner_rate,
        prompt_tokens_mean=prompt_mean,
        learner_fixed_s=0.0,
        weight_sync_s=10.0,
        step_overhead_s=0.0,
        learner_attention_per_context_token=QWEN3_1_7B_ATTENTION_PER_CONTEXT_TOKEN,
        sources={
            "rollouts_per_step": f"config: rollout.prompts_per_step × samples_per_prompt = {rollout.prompts_per_step} × "
                                 f"{rollout.samples_per_prompt}",
            "answer_tokens": f"assumed: log-normal, mean {answer_mean:.0f} tokens, sigma {answer_sigma} (no published "
                             "length distribution of Kimina-Prover-Distill-1.7B's answers found), capped at "
                             f"rollout.max_response_tokens = {rollout.max_response_tokens} (config)",
            "decode_tokens_per_s_per_sequence": f"published: {H100_TPOT_S * 1000:.1f} ms per output token per sequence, "
                "vLLM on one H100 at max-num-seqs 512 (gpustack performance lab, Qwen3.5-9B, throughput profile: "
                "https://docs.gpustack.ai/latest/performance-lab/qwen3.5-9b/h100); a 9B model's figure used for the "
                "1.7B (assumed comparable: at long contexts a decode step mostly reads the key/value cache, which "
                "vLLM fills either way)",
            "concurrent_sequences_per_device": f"{concurrent} per GPU: {KV_CACHE_SOURCE} / (prompt + mean answer "
                f"= {prompt_mean + answer_mean:.0f} tokens), at most vLLM's default max_num_seqs 256",
            "prefill_s": "assumed: 5 s to read a batch's prompts before the first token",
            "lean_latency": "assumed: log-normal, mean 5 s, sigma 1.0, 2% of proofs running to the timeout "
                            "(kimina-lean-server users report timeouts; no published latency distribution found); "
                            "the distribution is the stand-in's (trainer/verification/standin_server.py LatencyDistribution)",
            "lean_timeout_s": f"config: verifier.timeout_s = {verifier.timeout_s:g} s (the release's reward checks with "
                              "a 60 s timeout)",
            "lean_max_in_flight": f"config: verifier.max_in_flight = {verifier.max_in_flight}",
            "lean_reach_share": "assumed: 90% of answers pass the format check and go to Lean",
            "learner_tokens_per_s_per_device": f"{learner_rate:,.0f} tokens/s per GPU before attention: published "
                f"peak (NVIDIA H100 SXM datasheet, 989 TFLOPS BF16 dense) × {utilisation:.1%} utilisation, {measured} / "
                "(10 × 1.7B FLOPs per token: π_old's forward, forward and backward, the checkpointed forward again; "
                "Qwen3-1.7B model card)",
            "learner_attention_per_context_token": f"published: Qwen3-1.7B's config.json, 28 layers × 16 heads × 128 / "
                f"1.7B parameters = {QWEN3_1_7B_ATTENTION_PER_CONTEXT_TOKEN:.3g}: a 32,768-token sequence costs "
                f"{1 + 32768 * QWEN3_1_7B_ATTENTION_PER_CONTEXT_TOKEN:.2f}× its tokens' work without attention",
            "prompt_tokens_mean": "assumed: 400 tokens (the release's prompt template around a miniF2F-sized statement)",
            "learner_fixed_s": "assumed: 0 s",
            "weight_sync_s": "assumed: 10 s to hand 1.7B bfloat16 weights (3.4 GB) to the rollout engine",
            "step_overhead_s": "assumed: 0 s (checkpoints every 5 steps and evaluations left out)",
        },
    )



def measured_learner_utilisation() -> tuple[float, str]:
    """The learner's share of the GPU's peak FLOPs, attention counted, from the learner steps deploy/gpu_check.py
    measured (its files in docs/operations/gpu-checks, never copied by hand): the mean over the runs, and where it
    came from."""
    shares, lengths = [], set()
    for path in sorted((REPOSITORY / GPU_CHECKS).glob("*.json")):
        step = json.loads(path.read_text())["checks"].get("learner_step", {})
        if step.get("outcome") != "passed":
            continue
        # Files of before 2026-12-04 18:30 UTC do not name their lengths: they ran gpu_check.py's defaults.
        prompt = step.get("prompt_tokens", GPU_CHECK_SEQUENCE[0])
        response = step.get("response_tokens", GPU_CHECK_SEQUENCE[1])
        sequence = prompt + response
        lengths.add(f"{prompt:,} + {response:,}")
        seconds = step["tokens"] / step["tokens_per_second"]  # response tokens over response tokens/s
        sequences = step["tokens"] // response
        flops = sequences * sequence_work(sequence, QWEN3_1_7B_ATTENTION_PER_CONTEXT_TOKEN) * LEARNER_FLOPS_PER_TOKEN
        shares.append(flops / seconds / H100_BF16_DENSE_FLOPS)
    if not shares:
        raise CommandError(f"the h100x8 learner's utilisation is measured by deploy/gpu_check.py into {GPU_CHECKS}, "
                           "which holds no passed learner step in this checkout", EXIT_MISSING_FILE)
    return (sum(shares) / len(shares),
            f"measured: deploy/gpu_check.py's learner step on one H200 ({GPU_CHECKS}: "
            f"{', '.join(f'{share:.1%}' for share in shares)} in {len(shares)} runs, Qwen3-1.7B's widths, "
            f"{' and '.join(sorted(lengths))} tokens a sequence, attention counted)")


def measured_inputs(config) -> StepTimeInputs:
    """A CPU preset's inputs: fitted from its measured run, with this config's batch and Lean settings."""
    relative = MEASURED_RUNS[config.preset]
    path = REPOSITORY / relative
    if not path.is_file():
        raise CommandError(f"the {config.preset} preset's inputs are measured from {relative}, which is not in this "
                           f"checkout ({path}); run from the repository, or give --calibrate a run's events",
                           EXIT_MISSING_FILE)
    fitted = fit_inputs(read_events(path), source=relative)
    return with_config(fitted, config)


def with_config(inputs: StepTimeInputs, config) -> StepTimeInputs:
    """``inputs`` with the batch size, answer budget and Lean settings of ``config`` (a --set applies)."""
    rollout, verifier = config.rollout, config.verifier
    sources = dict(inputs.sources)
    sources["rollouts_per_step"] = (f"config: rollout.prompts_per_step × samples_per_prompt = {rollout.prompts_per_step}"
                                    f" × {rollout.samples_per_prompt}")
    sources["lean_timeout_s"] = f"config: verifier.timeout_s = {verifier.timeout_s:g} s"
    sources["lean_max_in_flight"] = f"config: verifier.max_in_flight = {verifier.max_in_flight}"
    answers = inputs.answer_tokens
    return replace(
        inputs,
        rollouts_per_step=rollout.prompts_per_step * rollout.samples_per_prompt,
        answer_tokens=replace(answers, max_tokens=rollout.max_response_tokens),
        lean_timeout_s=verifier.timeout_s,
        lean_max_in_flight=verifier.max_in_flight,
        sources=sources,
    )


def preset_inputs(config) -> StepTimeInputs:
    """The inputs for ``config``'s preset: measured for the CPU presets, published and assumed for h100x8."""
    if config.preset in MEASURED_RUNS:
        return measured_inputs(config)
    if config.preset == "h100x8":
        return h100x8_inputs(config)
    raise CommandError(f"the step-time model has no inputs for preset {config.preset!r}; it has them for "
                       f"{', '.join(sorted([*MEASURED_RUNS, 'h100x8']))}")


def layout_for(config, eta: int, best_split=None) -> tuple[Layout | None, str]:
    """The devices that generate and learn at staleness ``eta``, or None with the reason it cannot run;
    ValueError for a cluster no run can have.

    ``best_split(layouts)`` picks among candidate split layouts when the config leaves the choice open
    (a GPU run with η ≥ 1 and cluster.rollout_gpus 0, which the launch would refuse)."""
    cluster = config.cluster
    gpus, rollout_gpus = cluster.num_gpus, cluster.rollout_gpus
    if gpus == 0:
        return Layout(True, 1, 1, SHARED_CPU_NOTE), ""
    if rollout_gpus >= gpus:
        raise ValueError(f"cluster.rollout_gpus ({rollout_gpus}) leaves no learner GPU of cluster.num_gpus ({gpus}); "
                         "set it below num_gpus")
    if rollout_gpus > 0:
        return Layout(False, rollout_gpus, gpus - rollout_gpus,
                      f"{rollout_gpus} rollout GPU(s) generate while {gpus - rollout_gpus} learn (cluster.rollout_gpus)"), ""
    if eta == 0:
        return Layout(True, gpus, gpus, f"all {gpus} GPUs generate, then learn (the synchronous loop)"), ""
    if gpus == 1:
        return None, "one GPU: no pool left for rollouts, so η ≥ 1 cannot run (refused at launch)"
    candidates = [Layout(False, r, gpus - r, f"{r} rollout GPU(s) generate while {gpus - r} learn; cluster.rollout_gpus "
                         f"is 0, which cannot run asynchronously on GPUs, so the model chose the fastest split "
                         f"(set --set cluster.rollout_gpus=R to fix it)") for r in range(1, gpus)]
    return (best_split(candidates) if best_split else candidates[0]), ""


def model_bytes(config) -> ModelBytes:
    """The model's size for the cross-node traffic: h100x8's published parameter count, in bfloat16 (the learner's
    FSDP param_dtype and vLLM's serving dtype on an H100)."""
    if config.preset != "h100x8":
        raise CommandError(f"the step-time model sizes the network for h100x8 only (preset {config.preset!r} has no "
                           "published parameter count here); use --preset h100x8, or `python -m trainer memory-plan` "
                           "with the same layout options, which reads any model's architecture")
    return ModelBytes(QWEN3_1_7B_PARAMETERS, 2, 2, "published: Qwen3-1.7B's model card, 1.7B parameters, in bfloat16 "
                      "(the learner's FSDP param_dtype and vLLM's serving dtype on an H100)")


def step_shape(config, inputs: StepTimeInputs, learner_ranks: int) -> StepShape:
    """One step's answers and learner passes at the inputs' mean lengths."""
    sequence_tokens = inputs.prompt_tokens_mean + inputs.answer_tokens.mean_tokens
    micro = micro_batches_per_rank(config, learner_ranks, sequence_tokens)
    return StepShape(
        rollouts=inputs.rollouts_per_step, prompt_tokens=inputs.prompt_tokens_mean,
        answer_tokens=inputs.answer_tokens.mean_tokens, micro_batches_per_rank=micro, old_logprob_passes_per_rank=micro,
        lean_reach_share=inputs.lean_reach_share,
        source=(f"the step-time inputs' mean lengths ({inputs.prompt_tokens_mean:.0f} + "
                f"{inputs.answer_tokens.mean_tokens:.0f} tokens) packed into the config's micro-batches: {micro} per "
                f"learner rank a step"))


def with_cross_node_traffic(inputs: StepTimeInputs, traffic: CrossNodeTraffic) -> StepTimeInputs:
    """``inputs`` with the network's time added where it is spent: the FSDP collectives to the learner's step, the
    weight push to the sync, the scored batch's exchange to the step's bookkeeping."""
    fsdp, push, batch = (traffic.crossing(name) for name in (FSDP_COLLECTIVES, WEIGHT_PUSH, SCORED_BATCH))
    where = f"predicted for {traffic.layout.describe()} (trainer/node_layout.py)"
    sources = dict(inputs.sources)
    sources["learner_fixed_s"] = (f"{inputs.sources.get('learner_fixed_s', '')}; + {fsdp.seconds_per_step:.2f} s of "
                                  f"cross-node FSDP collectives, {where}")
    sources["weight_sync_s"] = (f"{inputs.sources.get('weight_sync_s', '')}; + {push.seconds_per_step:.3f} s of "
                                f"cross-node weight push, {where}")
    sources["step_overhead_s"] = (f"{inputs.sources.get('step_overhead_s', '')}; + {batch.seconds_per_step:.3f} s of "
                                  f"cross-node scored batch, {where}")
    return replace(inputs, learner_fixed_s=inputs.learner_fixed_s + fsdp.seconds_per_step,
                   weight_sync_s=inputs.weight_sync_s + push.seconds_per_step,
                   step_overhead_s=inputs.step_overhead_s + batch.seconds_per_step, sources=sources)
