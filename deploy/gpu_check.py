"""The proof for the day a GPU is lent: everything one GPU can show, in one run of under 8 minutes.

Run it on one GPU (written for an H200, 141 GB; no internet, no vLLM):

    python deploy/gpu_check.py --output gpu_check.json

Each check runs in turn, prints as it goes, and records its figures (or why it failed) in the one
JSON file ``--output``; a failed check does not stop the ones after it, and a check that would
start past the deadline is skipped and says so. The last line names the checks that passed,
failed and were skipped. Nothing is downloaded: the model is Qwen3-1.7B's architecture (the
recipe's Kimina-Prover-Distill-1.7B) at random weights, with a tokenizer of its vocabulary built
in memory.

The checks, in order (``CHECKS``):

- ``cuda_fail_fast``: a run asking for a GPU, started with no GPU visible, fails at start naming
  the cause (trainer/ranks.py: check_cuda_for_gpus) instead of training on the CPU.
- ``bfloat16``: the GPU computes bfloat16, and ``model.dtype: auto`` resolves to it.
- ``fsdp2_on_nccl``: one rank joins an NCCL process group, shards Qwen3-1.7B's widths (two
  layers) with the learner's FSDP2 (trainer/learning/sharding.py), and its loss and gradient norm equal
  the unsharded model's.
- ``learner_step``: the memory plan's prediction of one learner micro-step at the recipe's
  lengths (8,192 + 24,576 tokens) beside the measured peak of ``Learner.step`` at the real
  widths (it fails beyond ±25%), and the learner's tokens/s.
- ``packed_attention``: the attention path the learner chose on CUDA, and two answers packed in
  one micro-batch score as each alone.
- ``transformers_engine``: the transformers engine generates; after a learner step and a weight
  push, its log-probabilities of what it samples match the learner's (the train–inference gap).

Exits 2 with the reason when no CUDA GPU is visible, 1 when a check failed or was skipped, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent
if str(REPO_DIR) not in sys.path:  # run as a file (python deploy/gpu_check.py): the trainer is importable
    sys.path.insert(0, str(REPO_DIR))

from deploy.services import free_port  # noqa: E402 - importable only after the path above
from trainer.compute_dtype import resolve_compute_dtype  # noqa: E402 - importable only after the path above
from trainer.config import RunConfig  # noqa: E402 - importable only after the path above
from trainer.memory import memory_plan  # noqa: E402 - importable only after the path above
from trainer.memory.memory_plan import KNOWN_ARCHITECTURES, architecture_of  # noqa: E402 - importable only after the path above
from trainer.rollout.base import SamplingSettings  # noqa: E402 - importable only after the path above
from trainer.rollout.engines import build_engine  # noqa: E402 - importable only after the path above

MODEL = "Qwen/Qwen3-1.7B"  # the architecture of AI-MO/Kimina-Prover-Distill-1.7B
DEADLINE_S = 8 * 60
PLAN_TOLERANCE = 0.25  # measured peak within 25% of the plan's
MIN_GAP_OPENED = 0.02  # nats the learner's step must move the train–inference gap for the push to be judged
MIN_GAP_CLOSED = 0.75  # share of that the push must close
STATEMENT = "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by"


class CheckFailed(Exception):
    pass


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", default="gpu_check.json", help="where to write the figures as JSON (default: %(default)s)")
    parser.add_argument("--response-tokens", type=int, default=24576,
                        help="answer length of the learner's micro-step (default: 24,576, the recipe's)")
    parser.add_argument("--prompt-tokens", type=int, default=8192, help="prompt length of it (default: 8,192, the recipe's)")
    parser.add_argument("--generate-tokens", type=int, default=512,
                        help="tokens per sample for the generation check (default: %(default)s)")
    parser.add_argument("--samples", type=int, default=8, help="samples per prompt when generating (default: 8, the recipe's)")
    parser.add_argument("--prompts", type=int, default=4, help="prompts when generating (default: %(default)s)")
    parser.add_argument("--only", nargs="+", choices=[name for name, _ in CHECKS], metavar="CHECK",
                        help="run these checks alone, in the usual order (packed_attention and transformers_engine "
                             "need learner_step's learner); default: all")


def main(args: argparse.Namespace) -> int:
    problem = _missing_requirement()
    if problem:
        print(f"gpu_check: {problem}", file=sys.stderr)
        return 2
    import torch

    figures: dict = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "gpu": torch.cuda.get_device_name(0),
                     "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 1024**3, 1),
                     "torch": torch.__version__, "cuda": torch.version.cuda, "checks": {}}
    print(f"GPU: {figures['gpu']} ({figures['gpu_memory_gib']} GiB), torch {torch.__version__}, CUDA {torch.version.cuda}")
    context = {"args": args, "config": _one_gpu_config(args, figures["gpu_memory_gib"]),
               "tokenizer": _tokenizer_of_the_vocabulary()}
    started = time.perf_counter()
    try:
        run_checks(chosen_checks(args.only), context, figures["checks"], started)
    finally:
        figures["seconds"] = round(time.perf_counter() - started, 1)
        Path(args.output).write_text(json.dumps(figures, indent=2, default=str))
        print(f"\nfigures written to {args.output} ({figures['seconds']:.0f} s in all)")
        print(summary_line(figures["checks"]))
    return 0 if all(result["outcome"] == "passed" for result in figures["checks"].values()) else 1


def _missing_requirement() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return ("no CUDA GPU is visible (torch.cuda.is_available() is False); run this on a GPU node with a "
                "CUDA build of torch, and check CUDA_VISIBLE_DEVICES")
    return None


def chosen_checks(names: list[str] | None) -> list:
    return [(name, check) for name, check in CHECKS if names is None or name in names]


def run_checks(checks, context: dict, results: dict, started: float, deadline_s: float = DEADLINE_S) -> None:
    """Each check in turn, its figures or its failure in ``results[name]``; a failure never stops the next one,
    and none starts past the deadline (the lent GPU goes back at a fixed time)."""
    for name, check in checks:
        elapsed = time.perf_counter() - started
        if elapsed > deadline_s:
            results[name] = {"outcome": "skipped", "reason": f"{elapsed:.0f} s gone of the {deadline_s:.0f} s allowed"}
            print(f"\n[{name}] skipped: out of time")
            continue
        print(f"\n[{name}]")
        check_started = time.perf_counter()
        try:
            results[name] = {"outcome": "passed", **check(context)}
        except Exception as error:  # noqa: BLE001 - one check's failure is its figure; the next one still runs
            reason = str(error) if isinstance(error, CheckFailed) else f"{type(error).__name__}: {error}"
            results[name] = {"outcome": "failed", "reason": reason, "traceback": traceback.format_exc()[-4000:]}
            print(f"    FAILED: {reason}", file=sys.stderr)
        results[name]["seconds"] = round(time.perf_counter() - check_started, 1)


def summary_line(results: dict) -> str:
    """The last line printed: which checks passed, which failed, which were skipped."""
    by_outcome = {outcome: [name for name, result in results.items() if result["outcome"] == outcome]
                  for outcome in ("passed", "failed", "skipped")}
    parts = [f"{outcome} {len(names)} ({', '.join(names)})" if names else f"{outcome} 0"
             for outcome, names in by_outcome.items()]
    return f"gpu_check: {len(by_outcome['passed'])}/{len(results)} checks passed; " + "; ".join(parts)


# --- the checks ------------------------------------------------------------------------------------------------


def check_cuda_fail_fast(context: dict) -> dict:
    """`trainer run` with one GPU asked for and none visible: it must fail at start and name the cause."""
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        promptset = Path(folder) / "problems.jsonl"
        promptset.write_text(json.dumps({"problem_id": "p", "formal_statement": STATEMENT}) + "\n")
        environment = {name: value for name, value in os.environ.items() if name != "TRAINER_CPU_STANDS_IN_FOR_GPUS"}
        environment.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_DIR), os.environ.get("PYTHONPATH")])))
        started = time.perf_counter()
        result = subprocess.run(
            [sys.executable, "-m", "trainer", "run", "--preset", "cpu-demo", "--set", "cluster.num_gpus=1",
             "--promptset", str(promptset), "--output", str(Path(folder) / "run")],
            cwd=REPO_DIR, env=environment, capture_output=True, text=True, timeout=120)
        seconds = time.perf_counter() - started
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    reason = events[-1]["payload"].get("reason", "") if events and events[-1]["type"] == "run_finished" else ""
    print(f"    exit {result.returncode} after {seconds:.1f} s: {reason or result.stderr[-300:]}")
    if result.returncode == 0 or "no working CUDA" not in reason:
        raise CheckFailed(f"a one-GPU run without a visible GPU did not fail at start naming the cause "
                          f"(exit {result.returncode}, reason {reason!r})")
    return {"exit_code": result.returncode, "reason": reason, "seconds_to_fail": round(seconds, 1)}


def check_bfloat16(context: dict) -> dict:
    import torch

    resolved = resolve_compute_dtype("auto", "cuda")
    left = torch.randn(1024, 1024, device="cuda")
    right = torch.randn(1024, 1024, device="cuda")
    exact = left @ right
    error = ((left.bfloat16() @ right.bfloat16()).float() - exact).abs().max().item() / exact.abs().max().item()
    print(f"    bf16 supported: {torch.cuda.is_bf16_supported()}; auto resolves to {resolved.dtype}; "
          f"1024² matmul relative error {error:.2e}")
    if not torch.cuda.is_bf16_supported() or resolved.dtype != "bfloat16":
        raise CheckFailed(f"bfloat16 is not this GPU's compute dtype (auto resolves to {resolved.dtype}: {resolved.reason})")
    if error > 2e-2:
        raise CheckFailed(f"a bfloat16 matmul is off by {error:.2e} of its largest value")
    return {"is_bf16_supported": True, "auto_resolves_to": resolved.dtype, "matmul_relative_error": error}


def check_fsdp2_on_nccl(context: dict) -> dict:
    """One rank on NCCL: the learner's FSDP2 sharding of Qwen3-1.7B's widths (two layers) computes as the plain model."""
    import copy

    import torch
    import torch.distributed as dist
    from transformers import AutoModelForCausalLM

    from trainer.learning.sharding import shard_with_fsdp

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    try:
        total = torch.ones(4, device="cuda")
        dist.all_reduce(total)
        architecture = architecture_of(context["config"])
        architecture.num_hidden_layers = 2
        torch.manual_seed(0)
        with torch.device("cuda"):
            plain = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
        sharded = shard_with_fsdp(copy.deepcopy(plain), torch.bfloat16)
        input_ids = torch.randint(3, architecture.vocab_size, (1, 1024), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            plain_loss = plain(input_ids=input_ids, labels=input_ids).loss
        plain_loss.backward()
        sharded_loss = sharded(input_ids=input_ids, labels=input_ids).loss
        sharded_loss.backward()
        plain_norm = _gradient_norm(plain)
        sharded_norm = _gradient_norm(sharded)
    finally:
        dist.destroy_process_group()
    figures = {"nccl_version": ".".join(map(str, torch.cuda.nccl.version())), "all_reduce": total.tolist(),
               "plain_loss": plain_loss.item(), "sharded_loss": sharded_loss.item(),
               "plain_grad_norm": plain_norm, "sharded_grad_norm": sharded_norm}
    print(f"    NCCL {figures['nccl_version']}: loss {figures['plain_loss']:.4f} plain, {figures['sharded_loss']:.4f} "
          f"sharded; gradient norm {plain_norm:.4f} plain, {sharded_norm:.4f} sharded")
    if total.tolist() != [1.0] * 4:
        raise CheckFailed(f"an all-reduce over one NCCL rank changed its tensor: {total.tolist()}")
    if abs(figures["plain_loss"] - figures["sharded_loss"]) > 2e-2 * abs(figures["plain_loss"]):
        raise CheckFailed(f"FSDP2's loss {figures['sharded_loss']:.4f} differs from the plain model's {figures['plain_loss']:.4f}")
    if abs(plain_norm - sharded_norm) > 5e-2 * plain_norm:
        raise CheckFailed(f"FSDP2's gradient norm {sharded_norm:.4f} differs from the plain model's {plain_norm:.4f}")
    return figures


def _gradient_norm(model) -> float:
    squares = 0.0
    for parameter in model.parameters():
        if parameter.grad is not None:
            gradient = parameter.grad.full_tensor() if hasattr(parameter.grad, "full_tensor") else parameter.grad
            squares += float(gradient.float().pow(2).sum())
    return squares ** 0.5


def check_learner_step(context: dict) -> dict:
    """The memory plan's prediction, then the step for real at the real widths and lengths: measured beside planned."""
    config = context["config"]
    plan = _plan(config)
    context["learner"] = _learner(config, context["tokenizer"], context)
    return {"plan": plan, **_learner_step(context["learner"], config, plan),
            "parameters": context.get("parameters")}


def check_packed_attention(context: dict) -> dict:
    """The learner's attention on CUDA, and packing: two answers in one micro-batch score as each alone."""
    import torch

    learner = _learner_of(context)
    first, second = _sequences(context["config"], 512, 1024)
    packed = learner.old_logprobs([[first, second]])  # one micro-batch: the budget holds both
    alone = {**learner.old_logprobs([[first]]), **learner.old_logprobs([[second]])}
    difference = max(float((packed[key] - alone[key]).abs().max()) for key in packed)
    path = learner.attention_path.implementation if learner.attention_path is not None else "not packing"
    print(f"    {learner.attention_note}\n    packed against alone: max |Δ log-prob| {difference:.2e}")
    torch.cuda.empty_cache()
    if difference > 5e-2:
        raise CheckFailed(f"packed answers score differently from each alone: max |Δ log-prob| {difference:.3f} "
                          f"on the {path} path")
    return {"attention_path": path, "note": learner.attention_note, "packed_vs_alone_max_abs_diff": difference}


def check_transformers_engine(context: dict) -> dict:
    """Generation's speed, then the weight push: after the learner moves, the engine's log-probabilities of what it
    samples move away from the learner's, and the push closes what the step opened (the gap that Learner.step
    measures, trainer/observability/gap.py). At random weights the gap at the start is not small (a bfloat16 copy of
    near-uniform logits over 151,936 tokens), so the push is judged against it, not against zero."""
    args, learner = context["args"], _learner_of(context)
    generation = _transformers_generation(context["config"], learner, context["tokenizer"], args)
    engine = build_engine(context["config"], learner.model, context["tokenizer"])  # a bfloat16 copy of the learner
    try:
        sampling = SamplingSettings(n=4, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=128, seed=1)
        prompt_ids = _check_prompt(context["tokenizer"])
        fresh = learner.step(_sampled_sequences(engine, prompt_ids, sampling))
        learner.optimizer.param_groups[0]["lr"] = 1e-3  # for this check only: the step must visibly move the model
        learner.step(_sequences(context["config"], 64, 64, vocabulary=learner.model.config.vocab_size))
        stale = learner.step(_sampled_sequences(engine, prompt_ids, sampling))  # the copy still has the old weights
        engine.push_weights(learner.model)
        pushed = learner.step(_sampled_sequences(engine, prompt_ids, sampling))
    finally:
        engine.close()
    gap = {"fresh_mean": fresh["logprob_abs_diff_mean"], "stale_mean": stale["logprob_abs_diff_mean"],
           "pushed_mean": pushed["logprob_abs_diff_mean"], "pushed_max": pushed["logprob_abs_diff_max"]}
    print(f"    train–inference gap (mean nats): {gap['fresh_mean']:.4f} at the start, {gap['stale_mean']:.4f} after the "
          f"learner moved, {gap['pushed_mean']:.4f} after the push (max {gap['pushed_max']:.4f})")
    gap["closed_by_the_push"] = share_of_the_gap_closed(gap["fresh_mean"], gap["stale_mean"], gap["pushed_mean"])
    return {"generation": generation, "gap": gap}


def share_of_the_gap_closed(fresh: float, stale: float, pushed: float) -> float:
    """How much of the gap that the learner's step opened (fresh → stale) the push closed (stale → pushed)."""
    opened = stale - fresh
    if opened < MIN_GAP_OPENED:
        raise CheckFailed(f"the learner's step moved the gap by {opened:.4f} nats only ({fresh:.4f} → {stale:.4f}): "
                          "too little to tell whether the push arrives")
    closed = (stale - pushed) / opened
    if closed < MIN_GAP_CLOSED:
        raise CheckFailed(f"the push closed {closed:.0%} of the gap the step opened ({stale:.4f} → {pushed:.4f} nats, "
                          f"{fresh:.4f} at the start): the engine does not sample from the pushed weights")
    return closed


def _sampled_sequences(engine, prompt_ids: list[int], sampling: SamplingSettings):
    """What the engine sampled, as the learner trains it, with the engine's log-probabilities for the gap."""
    from trainer.learning.batching import TrainingSequence

    return [TrainingSequence(prompt_ids=prompt_ids, response_ids=list(generation.token_ids),
                             advantage=0.5 if index % 2 == 0 else -0.5, group_key="g0", rollout_key=f"s{index}",
                             sampled_logprobs=generation.logprobs)
            for index, generation in enumerate(engine.generate([prompt_ids], sampling))]


def _learner_of(context: dict):
    if "learner" not in context:
        raise CheckFailed("needs the learner of the learner_step check, which did not build it")
    return context["learner"]


CHECKS = [
    ("cuda_fail_fast", check_cuda_fail_fast),
    ("bfloat16", check_bfloat16),
    ("fsdp2_on_nccl", check_fsdp2_on_nccl),
    ("learner_step", check_learner_step),
    ("packed_attention", check_packed_attention),
    ("transformers_engine", check_transformers_engine),
]


def _one_gpu_config(args: argparse.Namespace, gpu_memory_gib: float):
    """h100x8's recipe on one GPU: its lengths, its token budget (one whole sequence per forward pass)."""
    return RunConfig.from_preset("h100x8", {
        "model": {"source": "huggingface", "name_or_path": MODEL},
        "rollout": {"engine": "transformers", "max_prompt_tokens": args.prompt_tokens,
                    "max_response_tokens": args.response_tokens},
        "retry": {"max_prompt_tokens": args.prompt_tokens},
        "optimizer": {"micro_batch_tokens": args.prompt_tokens + args.response_tokens},
        "cluster": {"num_gpus": 1, "gpu_memory_gib": gpu_memory_gib},
    })


def _tokenizer_of_the_vocabulary():
    """A word-level tokenizer with exactly the model's 151,936 ids (no download): random weights need no real one."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocabulary_size = KNOWN_ARCHITECTURES[MODEL][1]["vocab_size"]
    special = ["<|endoftext|>", "<|im_end|>", "<unk>"]
    vocabulary = {token: index for index, token in enumerate(special)}
    vocabulary.update({f"w{index}": index for index in range(len(special), vocabulary_size)})
    backend = Tokenizer(models.WordLevel(vocab=vocabulary, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<|endoftext|>", eos_token="<|im_end|>",
                                   unk_token="<unk>")


def _plan(config) -> dict:
    print(f"\n[1] memory plan of one learner micro-step on this GPU ({config.rollout.max_prompt_tokens:,} prompt + "
          f"{config.rollout.max_response_tokens:,} response tokens), on fake tensors")
    started = time.perf_counter()
    learner = memory_plan.plan_learner(config)
    print(f"    predicted peak {learner.peak_bytes / 1024**3:.2f} GiB (resident between steps "
          f"{learner.resident_bytes / 1024**3:.2f} GiB), planned in {time.perf_counter() - started:.0f} s")
    return {"predicted_peak_gib": round(learner.peak_bytes / 1024**3, 3),
            "predicted_resident_gib": round(learner.resident_bytes / 1024**3, 3),
            "micro_batch_tokens": learner.micro_batch_tokens}


def _learner(config, tokenizer, figures: dict):
    import torch
    from transformers import AutoModelForCausalLM

    from trainer.learning.learner import Learner

    print(f"\n[2] {MODEL}'s architecture at random weights, float32 master weights on the GPU")
    started = time.perf_counter()
    architecture = architecture_of(config)
    architecture._attn_implementation = "sdpa"  # what from_pretrained gives the learner
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(architecture, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    learner = Learner(config, model, tokenizer)
    parameters = sum(p.numel() for p in model.parameters())
    figures["parameters"] = parameters
    print(f"    {parameters / 1e9:.2f} B parameters, built in {time.perf_counter() - started:.0f} s")
    return learner


def _sequences(config, prompt_tokens: int, response_tokens: int, count: int = 2, vocabulary: int = 151_000):
    """Full-length sequences with advantages of both signs (no Lean here: the rewards are made up, and labelled so)."""
    import random

    from trainer.learning.batching import TrainingSequence

    rng = random.Random(0)
    return [TrainingSequence(prompt_ids=[rng.randrange(3, vocabulary) for _ in range(prompt_tokens)],
                             response_ids=[rng.randrange(3, vocabulary) for _ in range(response_tokens)],
                             advantage=0.5 if index % 2 == 0 else -0.5, group_key="g0", rollout_key=f"r{index}")
            for index in range(count)]


def _learner_step(learner, config, plan: dict) -> dict:
    import torch

    print("\n[3] the learner step for real (Learner.step), against the plan")
    # A short step first: AdamW's states exist from then on, as in a running job (and in the plan).
    learner.step(_sequences(config, 16, 16))
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    # One micro-batch each (the token budget holds one full sequence): two passes, one per sign of advantage.
    sequences = _sequences(config, config.rollout.max_prompt_tokens, config.rollout.max_response_tokens)
    metrics = learner.step(sequences)
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated() / 1024**3
    predicted = plan["predicted_peak_gib"]
    ratio = predicted / measured
    print(f"    {metrics['tokens']:,} response tokens in {metrics['seconds']:.1f} s: "
          f"{metrics['tokens_per_second']:,.0f} tokens/s (π_old pass, forward, backward, AdamW step)")
    print(f"    peak memory: measured {measured:.2f} GiB, planned {predicted:.2f} GiB ({ratio - 1:+.0%})")
    figures = {"measured_peak_gib": round(measured, 3), "predicted_peak_gib": predicted,
               "prediction_over_measurement": round(ratio, 3), "tokens": metrics["tokens"],
               "sequences": len(sequences), "prompt_tokens": config.rollout.max_prompt_tokens,
               "response_tokens": config.rollout.max_response_tokens,
               "step_seconds": round(metrics["seconds"], 2), "tokens_per_second": round(metrics["tokens_per_second"], 1),
               "loss": metrics["loss"], "grad_norm": metrics["grad_norm"]}
    if not 1 - PLAN_TOLERANCE <= ratio <= 1 + PLAN_TOLERANCE:
        raise CheckFailed(f"the memory plan predicted {predicted:.2f} GiB for the learner step and it took "
                          f"{measured:.2f} GiB: off by more than {PLAN_TOLERANCE:.0%}; trainer/memory/memory_plan.py misses something")
    return figures


def _transformers_generation(config, learner, tokenizer, args) -> dict:
    import torch

    print(f"\n[4] the transformers engine generates {args.samples} samples × {args.prompts} prompts, "
          f"{args.generate_tokens} tokens each")
    torch.cuda.empty_cache()
    engine = build_engine(config, learner.model, tokenizer)  # a bfloat16 copy of the float32 learner
    try:
        samples, tokens, seconds = _timed_generation(engine, _check_prompt(tokenizer), args)
    finally:
        engine.close()
    return {"samples": samples, "tokens": tokens, "seconds": round(seconds, 2),
            "tokens_per_second": round(tokens / seconds, 1)}


def _check_prompt(tokenizer) -> list[int]:
    return tokenizer(" ".join(f"w{index + 100}" for index in range(256)), add_special_tokens=False)["input_ids"]


def _timed_generation(engine, prompt_ids: list[int], args) -> tuple[int, int, float]:
    """``args.samples`` samples of each of ``args.prompts`` copies of the prompt: (samples, tokens, seconds)."""
    sampling = SamplingSettings(n=args.samples, temperature=1.0, top_p=1.0, top_k=-1,
                                max_tokens=args.generate_tokens, seed=0)
    started = time.perf_counter()
    generations = list(engine.generate([prompt_ids] * args.prompts, sampling))
    seconds = time.perf_counter() - started
    tokens = sum(g.num_tokens for g in generations)
    print(f"    {len(generations)} samples, {tokens:,} tokens in {seconds:.1f} s: {tokens / seconds:,.0f} tokens/s")
    if len(generations) != args.samples * args.prompts:
        raise CheckFailed(f"expected {args.samples * args.prompts} samples, got {len(generations)}")
    return len(generations), tokens, seconds


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0],
                                     epilog="Exits 2 without a CUDA GPU, 1 when a check fails.")
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(cli())
