"""Peak memory and speed of one learner step at long answers: the full-vocabulary log-probs against the chunked ones.

A toy's measurement, and its table says so: a tiny Llama with Qwen3's vocabulary (151,936
tokens; hidden 64, 2 layers, 9.8M parameters, 99% of them the embedding), where the logits are
nearly all the memory, so its ratios are the upper end of what the chunked log-probs save; at
the recipe's 1.7B model the layers' activations and AdamW's states weigh far more. It trains on one
answer of 4k, 8k and 16k response tokens (after a 64-token prompt): one ``Learner.step``,
π_old pass, gradient pass and AdamW step included, float32 on this machine's CPU, AdamW's
states already there (a step as it runs mid-training).

- ``chunked`` (measured): the trainer's learner as the driver runs it, untouched:
  ``trainer.learning.learner.Learner`` built by its own constructor (``trainer.memory.memory_measurement.real_learner``)
  and its ``step``, so packed micro-batches, ``response_logprobs`` (``ChunkedTokenLogprobs``,
  ``optimizer.logprob_chunk_tokens`` rows of the vocabulary at a time), the Dr.GRPO loss
  (``clipped_token_loss``, ``constant_divisor_loss``), gradient clipping and AdamW.
- ``full_vocabulary`` (the baseline, no longer in the product): the same ``Learner.step``
  with the two things the chunked path replaced put back (``use_full_vocabulary_baseline``):
  padded micro-batches and ``full_vocabulary_response_logprobs`` (the (tokens × vocabulary)
  logits and a log-softmax of the same size, in the π_old pass and again with gradients).

Every case is first *predicted*: the learner's micro-step on fake tensors, its memory
counted by PyTorch's MemTracker (``trainer.memory.memory_plan.plan_learner``, the launch check's
own method). It then runs for real only if ``MemAvailable`` (/proc/meminfo) holds the
prediction plus a quarter (the predictor's error, the allocator's slack) plus
``--spare-gib`` left for everything else on the machine; otherwise the table shows the
predicted figure, marked as such. A real case's peak is how far the step raised the
process's resident set (Linux's high-water mark, reset just before the step); its tokens/s
is the one the step itself reports (the figure the trainer logs); each real case also checks
the predictor (predicted / measured). Each case, predicted or real, runs in its own process.
The same single step is timed: at thousands of tokens a step takes tens of seconds, which
one-time costs do not move, and a second step per case would double a run on a machine
shared by several sessions (so the benchmarks' warm-up-then-median rule is waived here).
The chunked learner is also run at other chunk sizes, to show that its peak follows the
chunk, not the answer's length.

Rerun: .venv/bin/python benchmarks/learner_memory.py [--lengths 4096 8192 16384]
       [--chunks 256] [--spare-gib 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QWEN3_VOCABULARY = 151_936
PROMPT_TOKENS = 64
DEFAULT_CHUNK = 1024
# A real case needs its predicted peak plus this share (the predictor's error, the allocator's slack) free.
PREDICTION_MARGIN = 0.25
GIB = 2**30
RERUN = "  .venv/bin/python benchmarks/learner_memory.py"


def use_full_vocabulary_baseline() -> None:
    """Put back, in this process only, what the chunked path replaced: the baseline, never the measured side.

    The names the learner module imported are replaced there, before any ``Learner`` is built, so that the
    plan (``plan_learner``) and the real step both run the learner as it was: padded rows
    (``supports_packing`` false) and ``full_vocabulary_response_logprobs`` for the log-probs.
    Everything else, the loss and the optimizer included, is ``Learner.step``'s own.
    """
    from trainer.learning import learner as learner_module
    from trainer.learning.token_logprobs import full_vocabulary_response_logprobs

    def full_vocabulary_logprobs(model, batch, temperature=1.0, chunk_tokens=None):
        return full_vocabulary_response_logprobs(model, batch, temperature)

    learner_module.supports_packing = lambda model: False
    learner_module.response_logprobs = full_vocabulary_logprobs


def case_setup(implementation: str, response_tokens: int, chunk_tokens: int):
    """The case's run config and model architecture; for ``full_vocabulary``, the baseline put in place."""
    from transformers import LlamaConfig

    from trainer.config import RunConfig

    architecture = LlamaConfig(
        vocab_size=QWEN3_VOCABULARY, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=PROMPT_TOKENS + response_tokens,
        tie_word_embeddings=True, pad_token_id=0,
    )
    config = RunConfig.from_preset("cpu-demo", {
        "model": {"source": "tiny_random", "dtype": "float32", "gradient_checkpointing": False},
        "rollout": {"prompts_per_step": 1, "samples_per_prompt": 1, "max_prompt_tokens": PROMPT_TOKENS,
                    "max_response_tokens": response_tokens},
        "retry": {"enabled": False},  # else the plan's longest prompt would be the retry turn's
        "optimizer": {"mini_batch_prompts": 1, "micro_batch_sequences": 1, "micro_batch_tokens": None,
                      "logprob_chunk_tokens": chunk_tokens},
    })
    if implementation == "full_vocabulary":
        use_full_vocabulary_baseline()
    elif implementation != "chunked":
        raise ValueError(f"unknown implementation {implementation!r}; chunked or full_vocabulary")
    return config, architecture


def toy_model_size() -> str:
    """The benchmark's model in words: its shape, its parameter count and the embedding's share of it."""
    import torch
    from transformers import AutoModelForCausalLM

    _, architecture = case_setup("chunked", 4096, DEFAULT_CHUNK)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(architecture)
    parameters = sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
    embedding = model.get_input_embeddings().weight.numel()
    return (f"Llama, {architecture.num_hidden_layers} layers of hidden {architecture.hidden_size}, Qwen3's vocabulary "
            f"({QWEN3_VOCABULARY:,}), {parameters / 1e6:.1f}M parameters ({embedding / parameters:.0%} embedding)")


def predict_case(implementation: str, response_tokens: int, chunk_tokens: int) -> dict:
    """The step's peak above what the learner holds between steps, planned on fake tensors (no memory used)."""
    from trainer.memory.memory_plan import plan_learner

    config, architecture = case_setup(implementation, response_tokens, chunk_tokens)
    planned = plan_learner(config, architecture)
    return {"predicted_bytes": planned.peak_bytes - planned.resident_bytes}


def run_case(implementation: str, response_tokens: int, chunk_tokens: int) -> dict:
    """One real ``Learner.step``: how far it raised the resident set, and the seconds and tokens/s it reports."""
    import torch

    from trainer.memory.memory_measurement import peak_resident_bytes_added, real_learner
    from trainer.memory.memory_plan import full_length_sequences, warm_optimizer

    torch.set_num_threads(2)
    torch.manual_seed(0)
    config, architecture = case_setup(implementation, response_tokens, chunk_tokens)
    learner = real_learner(config, architecture)
    warm_optimizer(learner)
    sequences = full_length_sequences(config)  # the very sequence the prediction planned
    step_metrics = {}
    peak = peak_resident_bytes_added(lambda: step_metrics.update(learner.step(sequences)))
    if step_metrics["tokens"] != response_tokens or step_metrics["optimizer_steps"] != 1:
        raise RuntimeError(f"the step trained {step_metrics['tokens']} tokens in {step_metrics['optimizer_steps']} "
                           f"optimizer steps, not {response_tokens} in 1: it measured something else")
    return {"measured_bytes": peak, "seconds": step_metrics["seconds"],
            "tokens_per_second": step_metrics["tokens_per_second"]}


def in_subprocess(mode: str, implementation: str, response_tokens: int, chunk_tokens: int) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--case", mode, implementation, str(response_tokens), str(chunk_tokens)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if completed.returncode != 0:
        raise RuntimeError(f"{mode} {implementation} at {response_tokens} tokens failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def memory_available_bytes() -> int:
    """The kernel's estimate of memory a new process can take without swapping (MemAvailable)."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("/proc/meminfo has no MemAvailable; this benchmark needs Linux 3.14 or later")


def case(implementation: str, response_tokens: int, chunk_tokens: int, spare_gib: float) -> dict:
    """Predict, then run for real if memory allows; the figures and, when not run, why."""
    result = {"implementation": implementation, "response_tokens": response_tokens, "chunk_tokens": chunk_tokens,
              **in_subprocess("predict", implementation, response_tokens, chunk_tokens)}
    needed = result["predicted_bytes"] * (1 + PREDICTION_MARGIN) + spare_gib * GIB
    available = memory_available_bytes()
    result["available_bytes"] = available
    if needed > available:
        print(f"{implementation} at {response_tokens} tokens: predicted, not run: needs "
              f"{result['predicted_bytes'] / GIB:.1f} GiB, {available / GIB:.1f} GiB available", file=sys.stderr)
        return result
    result.update(in_subprocess("measure", implementation, response_tokens, chunk_tokens))
    print(f"{implementation} at {response_tokens} tokens: predicted {result['predicted_bytes'] / GIB:.2f} GiB, "
          f"measured {result['measured_bytes'] / GIB:.2f} GiB in {result['seconds']:.0f} s", file=sys.stderr)
    return result


def peak_cell(result: dict) -> str:
    if "measured_bytes" in result:
        return f"{result['measured_bytes'] / GIB:.2f} GiB"
    return (f"predicted, not run: needs {result['predicted_bytes'] / GIB:.1f} GiB, "
            f"{result['available_bytes'] / GIB:.1f} GiB available")


def peak_of(result: dict) -> tuple[float, bool]:
    """The measured peak if the case ran, else the predicted one; and whether it was measured."""
    if "measured_bytes" in result:
        return result["measured_bytes"], True
    return result["predicted_bytes"], False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384], help="response tokens per case")
    parser.add_argument("--chunks", type=int, nargs="*", default=[256],
                        help="other chunk sizes for the chunked learner, at the shortest length")
    parser.add_argument("--spare-gib", type=float, default=4.0,
                        help="memory a real case must leave free for everything else on the machine (GiB)")
    parser.add_argument("--case", nargs=4, metavar=("MODE", "IMPLEMENTATION", "TOKENS", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        mode, implementation, tokens, chunk = args.case
        run = predict_case if mode == "predict" else run_case
        print(json.dumps(run(implementation, int(tokens), int(chunk))))
        return

    lengths = sorted(args.lengths)
    results: dict[tuple[str, int, int], dict] = {}
    for length in lengths:
        for implementation in ("chunked", "full_vocabulary"):
            results[implementation, length, DEFAULT_CHUNK] = case(implementation, length, DEFAULT_CHUNK, args.spare_gib)
    for chunk in args.chunks:
        results["chunked", lengths[0], chunk] = case("chunked", lengths[0], chunk, args.spare_gib)

    print(f"learner step of a toy: {toy_model_size()}, {PROMPT_TOKENS}-token prompt, float32, one process, "
          f"CPU ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}); peak = the step's rise of the resident "
          f"set; the logits are nearly all of this model's memory, so the ratios are the upper end of the saving")
    print("| response tokens | full-vocabulary peak | chunked peak | peak ratio | full-vocabulary tokens/s "
          "| chunked tokens/s | speed ratio |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for length in lengths:
        chunked = results["chunked", length, DEFAULT_CHUNK]
        baseline = results["full_vocabulary", length, DEFAULT_CHUNK]
        baseline_peak, is_baseline_measured = peak_of(baseline)
        chunked_peak, is_chunked_measured = peak_of(chunked)
        ratio = f"{baseline_peak / chunked_peak:.1f}×" + ("" if is_baseline_measured and is_chunked_measured
                                                           else " (from a prediction)")
        speeds = ["—", "—", "—"]
        if is_baseline_measured and is_chunked_measured:
            speeds = [f"{baseline['tokens_per_second']:.0f}", f"{chunked['tokens_per_second']:.0f}",
                      f"{chunked['tokens_per_second'] / baseline['tokens_per_second']:.2f}×"]
        elif is_chunked_measured:
            speeds[1] = f"{chunked['tokens_per_second']:.0f}"
        print(f"| {length} | {peak_cell(baseline)} | {peak_cell(chunked)} | {ratio} | " + " | ".join(speeds) + " |")
    print(f"chunked peak by chunk size at {lengths[0]} response tokens:")
    for chunk in sorted([DEFAULT_CHUNK, *args.chunks]):
        result = results["chunked", lengths[0], chunk]
        speed = f", {result['tokens_per_second']:.0f} tokens/s" if "tokens_per_second" in result else ""
        print(f"  chunk {chunk:>5} tokens: {peak_cell(result)} ({chunk * QWEN3_VOCABULARY * 4 / 2**20:.0f} MiB "
              f"per float32 chunk of logits){speed}")
    print("the predictor (fake tensors, MemTracker) against each real case, predicted / measured peak:")
    for (implementation, length, chunk), result in results.items():
        if "measured_bytes" in result:
            print(f"  {implementation:<15} {length:>6} tokens, chunk {chunk:>4}: {result['predicted_bytes'] / GIB:6.2f} / "
                  f"{result['measured_bytes'] / GIB:6.2f} GiB = {result['predicted_bytes'] / result['measured_bytes']:.2f}")
    print("rerun:")
    print(RERUN + " --lengths " + " ".join(map(str, lengths)) + " --chunks " + " ".join(map(str, args.chunks))
          + f" --spare-gib {args.spare_gib:g}")


if __name__ == "__main__":
    main()
