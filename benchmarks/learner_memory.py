"""Peak memory and speed of one learner step at long answers: the full-vocabulary log-probs against the chunked ones.

A tiny Llama with Qwen3's vocabulary (151,936 tokens; hidden 64, 2 layers) trains on one
answer of 4k, 8k and 16k response tokens (after a 64-token prompt): one ``Learner.step``,
π_old pass, gradient pass and AdamW step included, float32 on this machine's CPU.

- ``full_vocabulary``: the learner as it was, padded micro-batches and
  ``full_vocabulary_response_logprobs`` (the (tokens × vocabulary) logits, a float32 copy and
  a log-softmax of the same size, in the π_old pass and again with gradients).
- ``chunked``: the learner as it is, packed micro-batches and ``response_logprobs``
  (``optimizer.logprob_chunk_tokens`` rows of the vocabulary at a time).

Each case runs in its own process. Peak memory is the process's peak resident set
(``ru_maxrss``) above its resident set just before the step. The same single step is timed:
at thousands of tokens a step takes tens of seconds, which one-time costs do not move, and a
second step per case would double a run on a machine shared by several sessions (so the
benchmarks' warm-up-then-median rule is waived here). A full-vocabulary case whose peak,
extrapolated linearly from the last one measured (first from a run at a quarter of the
shortest length), would exceed ``--max-baseline-gib`` or half the memory free at that
moment is not run and is reported as such, never as a number. The chunked learner is also
run at other chunk sizes, to show that its peak follows the chunk, not the answer's length.

Rerun: .venv/bin/python benchmarks/learner_memory.py [--lengths 4096 8192 16384]
       [--chunks 256] [--max-baseline-gib 12]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QWEN3_VOCABULARY = 151_936
PROMPT_TOKENS = 64
DEFAULT_CHUNK = 1024
RERUN = "  .venv/bin/python benchmarks/learner_memory.py"


def run_case(implementation: str, response_tokens: int, chunk_tokens: int) -> dict:
    """One case, in this process: measure one learner step's peak memory, then time a second step."""
    import resource

    import psutil
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer import learner as learner_module
    from trainer.config import RunConfig
    from trainer.learner import Learner, TrainingSequence, full_vocabulary_response_logprobs

    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(
        vocab_size=QWEN3_VOCABULARY, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=PROMPT_TOKENS + response_tokens,
        tie_word_embeddings=True, pad_token_id=0,
    ))

    class PadOnly:
        pad_token_id = 0

    config = RunConfig.from_preset("cpu-demo", {
        "model": {"source": "tiny_random", "dtype": "float32", "gradient_checkpointing": False},
        "rollout": {"prompts_per_step": 1, "samples_per_prompt": 1, "max_response_tokens": response_tokens},
        "optimizer": {"mini_batch_prompts": 1, "micro_batch_sequences": 1, "logprob_chunk_tokens": chunk_tokens},
    })
    learner = Learner(config, model, PadOnly())
    if implementation == "full_vocabulary":
        # The learner before the chunked path: padded rows and the full-vocabulary function.
        learner.is_packing = False
        learner_module.response_logprobs = lambda model, batch, temperature, chunk: (
            full_vocabulary_response_logprobs(model, batch, temperature))
    generator = torch.Generator().manual_seed(1)
    sequence = TrainingSequence(
        torch.randint(1, QWEN3_VOCABULARY, (PROMPT_TOKENS,), generator=generator).tolist(),
        torch.randint(1, QWEN3_VOCABULARY, (response_tokens,), generator=generator).tolist(),
        advantage=0.5, group_key="p0",
    )
    resident_before = psutil.Process().memory_info().rss
    started = time.perf_counter()
    learner.step([sequence])
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {
        "implementation": implementation, "response_tokens": response_tokens, "chunk_tokens": chunk_tokens,
        "peak_mib": (peak - resident_before) / 2**20, "seconds": seconds, "tokens_per_second": response_tokens / seconds,
    }


def run_in_subprocess(implementation: str, response_tokens: int, chunk_tokens: int) -> dict:
    completed = subprocess.run(
        [sys.executable, __file__, "--case", implementation, str(response_tokens), str(chunk_tokens)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    if completed.returncode != 0:
        raise RuntimeError(f"case {implementation} at {response_tokens} tokens failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8192, 16384], help="response tokens per case")
    parser.add_argument("--chunks", type=int, nargs="*", default=[256],
                        help="other chunk sizes for the chunked learner, at the shortest length")
    parser.add_argument("--max-baseline-gib", type=float, default=12.0,
                        help="skip a full-vocabulary case predicted to need more than this")
    parser.add_argument("--case", nargs=3, metavar=("IMPLEMENTATION", "TOKENS", "CHUNK"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        implementation, tokens, chunk = args.case
        print(json.dumps(run_case(implementation, int(tokens), int(chunk))))
        return

    import psutil

    lengths = sorted(args.lengths)
    results: dict[tuple[str, int, int], dict] = {}
    skipped: dict[int, str] = {}
    calibration = run_in_subprocess("full_vocabulary", max(lengths[0] // 4, 16), DEFAULT_CHUNK)
    baseline_mib_per_token = calibration["peak_mib"] / calibration["response_tokens"]
    for length in lengths:
        results["chunked", length, DEFAULT_CHUNK] = run_in_subprocess("chunked", length, DEFAULT_CHUNK)
        if baseline_mib_per_token is not None:
            predicted_gib = baseline_mib_per_token * length / 1024
            allowed_gib = min(args.max_baseline_gib, psutil.virtual_memory().available / 2**30 / 2)
            if predicted_gib > allowed_gib:
                skipped[length] = f"not run: needs ≈{predicted_gib:.0f} GiB (extrapolated), allowed {allowed_gib:.1f} GiB"
                continue
        baseline = run_in_subprocess("full_vocabulary", length, DEFAULT_CHUNK)
        results["full_vocabulary", length, DEFAULT_CHUNK] = baseline
        baseline_mib_per_token = baseline["peak_mib"] / length
    for chunk in args.chunks:
        results["chunked", lengths[0], chunk] = run_in_subprocess("chunked", lengths[0], chunk)

    print(f"full-vocabulary calibration at {calibration['response_tokens']} tokens: {calibration['peak_mib']:.0f} MiB, "
          f"{calibration['tokens_per_second']:.0f} tokens/s")
    print(f"learner step, tiny Llama with Qwen3's vocabulary ({QWEN3_VOCABULARY:,}), {PROMPT_TOKENS}-token prompt, "
          f"float32, CPU ({os.cpu_count()} cores)")
    print(f"{'response tokens':>15} | {'full-vocabulary peak':>20} | {'chunked peak':>12} | {'peak ratio':>10} | "
          f"{'full-vocab tok/s':>16} | {'chunked tok/s':>13} | {'speed ratio':>11}")
    for length in lengths:
        chunked = results["chunked", length, DEFAULT_CHUNK]
        baseline = results.get(("full_vocabulary", length, DEFAULT_CHUNK))
        if baseline is None:
            print(f"{length:>15} | {skipped[length]:>20} | {chunked['peak_mib']:>8.0f} MiB | {'—':>10} | {'—':>16} | "
                  f"{chunked['tokens_per_second']:>13.0f} | {'—':>11}")
            continue
        print(f"{length:>15} | {baseline['peak_mib']:>16.0f} MiB | {chunked['peak_mib']:>8.0f} MiB | "
              f"{baseline['peak_mib'] / chunked['peak_mib']:>9.1f}× | {baseline['tokens_per_second']:>16.0f} | "
              f"{chunked['tokens_per_second']:>13.0f} | {chunked['tokens_per_second'] / baseline['tokens_per_second']:>10.2f}×")
    print(f"chunked peak by chunk size at {lengths[0]} response tokens:")
    for chunk in sorted([DEFAULT_CHUNK, *args.chunks]):
        case = results["chunked", lengths[0], chunk]
        print(f"  chunk {chunk:>5} tokens: {case['peak_mib']:>6.0f} MiB ({chunk * QWEN3_VOCABULARY * 4 / 2**20:.0f} MiB "
              f"per float32 chunk of logits), {case['tokens_per_second']:.0f} tokens/s")
    print("rerun:")
    print(RERUN + " --lengths " + " ".join(map(str, lengths)) + " --chunks " + " ".join(map(str, args.chunks))
          + f" --max-baseline-gib {args.max_baseline_gib:g}")


if __name__ == "__main__":
    main()
