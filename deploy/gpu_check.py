"""The proof for the day a GPU is lent: the recipe's learner step at its real size, against the memory plan.

Run it on one GPU (written for an H200, 141 GB, no internet, vLLM usually absent; it ends
within 8 minutes):

    python deploy/gpu_check.py --output gpu_check.json

What it does, in order, printing as it goes and writing every figure to ``--output``:

1. Builds Qwen3-1.7B's architecture (the recipe's Kimina-Prover-Distill-1.7B: hidden 2048,
   28 layers, 16 heads, 8 KV heads, MLP 6144, vocabulary 151,936, tied embeddings) at random
   weights, directly on the GPU, with a tokenizer of the same vocabulary built in memory.
   Nothing is downloaded.
2. The memory plan (trainer/memory_plan.py) predicts the peak of one learner micro-step of
   one full-length sequence (8,192 prompt + 24,576 response tokens) on this one GPU, on fake
   tensors, before anything real runs.
3. The same step for real, through ``Learner.step`` (chunked log-probabilities, token-budget
   micro-batches, the whole Dr.GRPO update), after a short warm-up step that creates AdamW's
   states as they stand in a running job: the measured peak
   (``torch.cuda.max_memory_allocated``) against the prediction, and the learner's tokens/s.
4. The transformers engine generates (the rollout engine of a GPU without vLLM): tokens/s.
5. With vLLM installed: vLLM loads the same random model, samples, takes the learner's weights
   (``push_weights``) and its log-probabilities must move to the learner's. Without vLLM these
   checks are skipped with a line that says so.

Exits 2 with the reason when no CUDA GPU is visible, 1 when a check fails, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from trainer import memory_plan
from trainer.config import RunConfig
from trainer.driver import release_cached_accelerator_memory
from trainer.memory_plan import KNOWN_ARCHITECTURES, architecture_of
from trainer.rollout.base import SamplingSettings
from trainer.rollout.engines import build_engine

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MODEL = "Qwen/Qwen3-1.7B"  # the architecture of AI-MO/Kimina-Prover-Distill-1.7B
DEADLINE_S = 8 * 60
PLAN_TOLERANCE = 0.25  # measured peak within 25% of the plan's
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


def main(args: argparse.Namespace) -> int:
    problem = _missing_requirement()
    if problem:
        print(f"gpu_check: {problem}", file=sys.stderr)
        return 2
    figures: dict = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    started = time.perf_counter()
    status = 0
    try:
        _run_checks(args, figures, started)
    except CheckFailed as failure:
        figures["failed"] = str(failure)
        print(f"\nFAILED: {failure}", file=sys.stderr)
        status = 1
    finally:
        figures["seconds"] = round(time.perf_counter() - started, 1)
        Path(args.output).write_text(json.dumps(figures, indent=2))
        print(f"\nfigures written to {args.output} ({figures['seconds']:.0f} s in all)")
    if status == 0:
        print("all GPU checks passed")
    return status


def _missing_requirement() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return ("no CUDA GPU is visible (torch.cuda.is_available() is False); run this on a GPU node with a "
                "CUDA build of torch, and check CUDA_VISIBLE_DEVICES")
    return None


def _run_checks(args: argparse.Namespace, figures: dict, started: float) -> None:
    import importlib.util

    import torch

    figures["gpu"] = torch.cuda.get_device_name(0)
    figures["gpu_memory_gib"] = round(torch.cuda.get_device_properties(0).total_memory / 1024**3, 1)
    figures["torch"] = torch.__version__
    print(f"GPU: {figures['gpu']} ({figures['gpu_memory_gib']} GiB), torch {torch.__version__}")
    config = _one_gpu_config(args, figures["gpu_memory_gib"])
    tokenizer = _tokenizer_of_the_vocabulary()

    figures["plan"] = _plan(config)
    _deadline(started, "the memory plan")
    learner = _learner(config, tokenizer, figures)
    figures["learner"] = _learner_step(learner, config, figures["plan"])
    _deadline(started, "the learner step")
    figures["transformers_engine"] = _transformers_generation(config, learner, tokenizer, args)
    _deadline(started, "the transformers engine")
    if importlib.util.find_spec("vllm") is None:
        line = "vLLM is not installed here: skipping the vLLM checks (sampling, weight push, log-prob agreement)"
        print(f"\n[5] {line}")
        figures["vllm"] = {"skipped": line}
    else:
        figures["vllm"] = _vllm_checks(config, learner, tokenizer, args)
    _deadline(started, "the vLLM checks")


def _deadline(started: float, after: str) -> None:
    elapsed = time.perf_counter() - started
    if elapsed > DEADLINE_S:
        raise CheckFailed(f"{elapsed:.0f} s after {after}: over the {DEADLINE_S} s this check may take")


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

    from trainer.learner import Learner

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


def _sequences(config, prompt_tokens: int, response_tokens: int, count: int = 2):
    """Full-length sequences with advantages of both signs (no Lean here: the rewards are made up, and labelled so)."""
    import random

    from trainer.batching import TrainingSequence

    rng = random.Random(0)
    vocabulary = 151_000
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
               "seconds": round(metrics["seconds"], 2), "tokens_per_second": round(metrics["tokens_per_second"], 1),
               "loss": metrics["loss"], "grad_norm": metrics["grad_norm"]}
    if not 1 - PLAN_TOLERANCE <= ratio <= 1 + PLAN_TOLERANCE:
        raise CheckFailed(f"the memory plan predicted {predicted:.2f} GiB for the learner step and it took "
                          f"{measured:.2f} GiB: off by more than {PLAN_TOLERANCE:.0%}; trainer/memory_plan.py misses something")
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


def _vllm_checks(config, learner, tokenizer, args) -> dict:
    """vLLM serves the random model, samples, takes the learner's weights, and then scores text as the learner does."""
    import torch
    import vllm

    from trainer.rollout.vllm_engine import VllmEngine

    print(f"\n[5] vLLM {vllm.__version__}: sampling, the hand-over and the weight push")
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as folder:
        learner.model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        vllm_config = RunConfig.model_validate({**config.model_dump(mode="python"),
                                                "model": {**config.model.model_dump(), "name_or_path": folder},
                                                "rollout": {**config.rollout.model_dump(), "engine": "vllm",
                                                            "vllm_gpu_memory_utilization": 0.4}})
        torch.cuda.empty_cache()
        engine = VllmEngine.from_config(vllm_config, learner.model, tokenizer)
        try:
            prompt_ids = _check_prompt(tokenizer)
            _, tokens, seconds = _timed_generation(engine, prompt_ids, args)

            fixed = prompt_ids[:64]
            before = _vllm_token_logprobs(engine, fixed)
            engine.sleep()
            learner.optimizer.param_groups[0]["lr"] = 1e-3  # for this check only: one step must visibly move the model
            learner.step(_sequences(config, 64, 64))
            release_cached_accelerator_memory()
            started = time.perf_counter()
            engine.push_weights(learner.model)
            push_seconds = time.perf_counter() - started
            after = _vllm_token_logprobs(engine, fixed)
            learner_now = _learner_token_logprobs(learner, fixed)
        finally:
            engine.close()
    gap_before = statistics.fmean(abs(a - b) for a, b in zip(before, learner_now))
    gap_after = statistics.fmean(abs(a - b) for a, b in zip(after, learner_now))
    print(f"    weights pushed in {push_seconds:.2f} s; mean |vLLM − learner| log-prob {gap_before:.4f} nats before "
          f"the push, {gap_after:.4f} after")
    if not gap_after < gap_before:
        raise CheckFailed(f"vLLM did not move toward the learner ({gap_before:.4f} → {gap_after:.4f} nats)")
    return {"tokens_per_second": round(tokens / seconds, 1), "weight_push_seconds": round(push_seconds, 2),
            "logprob_gap_before_push": gap_before, "logprob_gap_after_push": gap_after}


def _vllm_token_logprobs(engine, token_ids: list[int]) -> list[float]:
    import vllm

    engine.wake()
    params = vllm.SamplingParams(max_tokens=1, temperature=0.0, prompt_logprobs=0)
    (output,) = engine.llm.generate([{"prompt_token_ids": token_ids}], sampling_params=params, use_tqdm=False)
    return [entry[token].logprob for token, entry in zip(token_ids[1:], output.prompt_logprobs[1:])]


def _learner_token_logprobs(learner, token_ids: list[int]) -> list[float]:
    import torch

    with torch.no_grad(), learner._autocast():
        input_ids = torch.tensor([token_ids], device=learner.device)
        logits = learner.model(input_ids=input_ids, use_cache=False).logits[0, :-1].float()  # (T-1, V)
    log_probs = torch.log_softmax(logits, dim=-1)
    return log_probs.gather(-1, input_ids[0, 1:].unsqueeze(-1)).squeeze(-1).tolist()


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gpu_check", description=__doc__.splitlines()[0],
                                     epilog="Exits 2 without a CUDA GPU, 1 when a check fails.")
    add_arguments(parser)
    return main(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(cli())
