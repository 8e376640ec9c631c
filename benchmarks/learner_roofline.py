"""How close the learner's step comes to what this machine allows for the run's model: a roofline, in one run.

A learner step of the cpu-demo (``Learner.step``) is three kinds of work:

    π_old        a forward pass over every sequence, without gradients (the ratio's denominator)
    training     a forward and a backward pass over every sequence with an advantage
    optimizer    gradient clipping and one AdamW step per mini-batch

Each pass runs every linear layer of the model on each micro-batch's packed tokens: a forward is one
(T × k) @ (k × n) matmul per layer, a backward two more of the same size (the input's gradient and the
weight's). The output head runs on the response positions only (trainer/learning/token_logprobs.py). So a pass cannot
take less than the sum, over micro-batches and layers, of those matmuls timed on this machine at the run's
dtype and threads; AdamW and the clipping cannot take less than the bytes they read and write (~44 per
float32 parameter: weight, gradient and two moments read, three written, the gradient read twice more for the
norm and the scaling) moved at this machine's copy bandwidth. Attention's own arithmetic (about a tenth of a
layer's at these lengths), the elementwise work and the loss are left out: the bound is optimistic, and each
phase's share of it says how much of the phase is overhead.

The bound is measured just before and just after the learner in the same process and their mean is used,
so a busy machine lowers both; the load average is printed with every figure. Sequences are random tokens
at the demo's prompt length (its first prompts, rendered) and ``--response-tokens``, every one with an
advantage (the most a step trains). One AdamW step is also timed with torch's per-tensor loop and with its fused
kernel on the same parameters and gradients, as a ratio.

Rerun: .venv/bin/python benchmarks/learner_roofline.py [--prompts 4] [--samples 4] [--response-tokens 128]
       [--repeats 3] [--threads N]
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "platform")]

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# Bytes per float32 parameter an AdamW step with gradient clipping moves: reads of the weight, the gradient and
# both moments and writes of the weight and both moments (28), plus the gradient read for the norm, read and
# written by the scaling (12); 4 more for the moment's intermediate the foreach implementation writes.
OPTIMIZER_BYTES_PER_PARAMETER = 44


@dataclass(frozen=True)
class LinearShape:
    """``count`` linear layers of a (k → n) weight in one pass of the model."""

    name: str
    k: int
    n: int
    count: int
    is_head: bool = False


def linear_shapes(config) -> list[LinearShape]:
    """Every linear layer of a Llama-style decoder, same shapes merged: query, key, value and output projections,
    the gated MLP's gate, up and down per layer, and the output head once."""
    heads = config.num_attention_heads
    head_size = getattr(config, "head_dim", None) or config.hidden_size // heads
    q, kv = heads * head_size, (getattr(config, "num_key_value_heads", None) or heads) * head_size
    hidden, inner, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    merged: dict[tuple[int, int], LinearShape] = {}
    for name, k, n in [("query", hidden, q), ("key", hidden, kv), ("value", hidden, kv), ("output", q, hidden),
                       ("gate", hidden, inner), ("up", hidden, inner), ("down", inner, hidden)]:
        known = merged.get((k, n))
        merged[(k, n)] = LinearShape(f"{known.name}+{name}" if known else name, k, n, (known.count if known else 0) + layers)
    return [*merged.values(), LinearShape("head", hidden, config.vocab_size, 1, is_head=True)]


def pass_flops(shapes: list[LinearShape], tokens: int, response_tokens: int, *, backward: bool) -> float:
    """Matmul FLOPs of one pass over a micro-batch of ``tokens`` packed tokens (the head on ``response_tokens``)."""
    factor = 3 if backward else 1
    return sum(factor * 2 * (response_tokens if s.is_head else tokens) * s.k * s.n * s.count for s in shapes)


def time_pass(shapes: list[LinearShape], tokens: int, response_tokens: int, dtype, *, backward: bool,
              repeats: int = 3) -> float:
    """Seconds of a pass's matmuls at these token counts, as torch runs them here: the forward's
    (T × k) @ (k × n) per layer and, with ``backward``, the input's (T × n) @ (n × k) and the weight's
    (n × T) @ (T × k) gradients; each shape timed once and counted as often as the pass runs it."""
    import torch

    from benchmarks.timing import median_seconds

    total = 0.0
    with torch.no_grad():
        for shape in shapes:
            rows = response_tokens if shape.is_head else tokens
            activation = torch.randn(rows, shape.k, dtype=dtype)
            weight = torch.randn(shape.n, shape.k, dtype=dtype)
            output_gradient = torch.randn(rows, shape.n, dtype=dtype)

            def run(activation=activation, weight=weight, output_gradient=output_gradient):
                torch.nn.functional.linear(activation, weight)
                if backward:
                    output_gradient @ weight
                    output_gradient.t() @ activation

            total += median_seconds(run, repeats) * shape.count
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--response-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    args = parser.parse_args()

    import statistics
    import time

    import torch

    from benchmarks.cpu_rollout_precision import demo_prompts
    from benchmarks.generation_roofline import copy_bandwidth, load_average
    from trainer.config import RunConfig
    from trainer.learning.batching import TrainingSequence, mini_batches
    from trainer.learning.learner import Learner
    from trainer.learning.models import load_policy

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} torch threads; "
          f"{load_average()} at the start", flush=True)
    config = RunConfig.from_preset("cpu-demo", {"rollout": {"prompts_per_step": args.prompts,
                                                            "samples_per_prompt": args.samples}})
    model, tokenizer = load_policy(config.model, seed=0)
    learner = Learner(config, model, tokenizer)
    generator = torch.Generator().manual_seed(0)
    sequences = []
    for prompt_index, prompt in enumerate(demo_prompts(tokenizer, args.prompts)):
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        for sample in range(args.samples):
            response = torch.randint(100, tokenizer.vocab_size, (args.response_tokens,), generator=generator).tolist()
            sequences.append(TrainingSequence(prompt_ids, response, 1.0 if sample % 2 else -1.0,
                                              group_key=str(prompt_index), rollout_key=f"{prompt_index}-{sample}"))
    batches = mini_batches(sequences, config.optimizer.mini_batch_prompts)
    micro_batches = [micro for mini in batches for micro in learner.micro_batches(mini)]
    sizes = [(sum(len(s.prompt_ids) + len(s.response_ids) for s in micro), sum(len(s.response_ids) for s in micro))
             for micro in micro_batches]
    tokens = sum(size for size, _ in sizes)
    parameters = sum(p.numel() for p in model.parameters())
    dtype = learner.compute_dtype
    shapes = linear_shapes(model.config)
    print(f"policy: {config.model.name_or_path}, {parameters / 1e6:.1f}M parameters, compute {dtype}; "
          f"{len(sequences)} sequences, {tokens} tokens ({sum(r for _, r in sizes)} response) in "
          f"{len(batches)} mini-batches of {len(micro_batches) // len(batches)} micro-batches", flush=True)

    def bound() -> dict[str, float]:
        before = load_average()
        bandwidth = copy_bandwidth()
        figures = {
            "π_old": sum(time_pass(shapes, t, r, dtype, backward=False) for t, r in sizes),
            "training": sum(time_pass(shapes, t, r, dtype, backward=True) for t, r in sizes),
            "optimizer": len(batches) * parameters * OPTIMIZER_BYTES_PER_PARAMETER / bandwidth,
        }
        flops = sum(pass_flops(shapes, t, r, backward=True) for t, r in sizes)
        print(f"\nbound ({before} before, {load_average()} after): copy {bandwidth / 1e9:.1f} GB/s; training "
              f"matmuls {flops / figures['training'] / 1e9:.0f} GFLOP/s; " +
              ", ".join(f"{name} {seconds:.2f} s" for name, seconds in figures.items()), flush=True)
        return figures

    def measure() -> dict[str, float]:
        phases = {"π_old": [], "training": [], "optimizer": [], "step": []}
        for repeat in range(args.repeats + 1):  # the first is a warm-up
            started = time.perf_counter()
            old = learner.old_logprobs(batches)
            marks = [time.perf_counter()]
            training = optimizer = 0.0
            for mini in batches:
                learner.optimizer.zero_grad(set_to_none=False)
                begun = time.perf_counter()
                learner.accumulate_gradients(mini, old)
                trained = time.perf_counter()
                learner._clip_gradients()
                learner.optimizer.step()
                training, optimizer = training + trained - begun, optimizer + time.perf_counter() - trained
            if repeat:
                phases["π_old"].append(marks[0] - started)
                phases["training"].append(training)
                phases["optimizer"].append(optimizer)
                phases["step"].append(time.perf_counter() - started)
        return {name: statistics.median(values) for name, values in phases.items()}

    def optimizer_step_seconds(**implementation) -> float:
        """One AdamW step over the policy's parameters and their last gradients, with a fresh optimizer of the
        learner's settings but the given implementation (its first step, which allocates the moments, untimed)."""
        from benchmarks.timing import median_seconds

        settings = {k: v for k, v in learner.optimizer.defaults.items() if k in ("lr", "betas", "weight_decay", "eps")}
        optimizer = torch.optim.AdamW(model.parameters(), **settings, **implementation)
        seconds = median_seconds(optimizer.step, args.repeats)
        del optimizer
        return seconds

    before_bound = bound()
    before = load_average()
    measured = measure()
    loop, fused = optimizer_step_seconds(foreach=False), optimizer_step_seconds(fused=True)
    after = load_average()
    after_bound = bound()
    limit = {name: (before_bound[name] + after_bound[name]) / 2 for name in before_bound}
    limit["step"] = sum(limit.values())
    print(f"\nlearner ({before} before, {after} after), median of {args.repeats} steps:")
    print(f"{'phase':10s} {'measured':>9s} {'bound':>7s} {'of bound':>9s} {'over':>7s}")
    for name in ("π_old", "training", "optimizer", "step"):
        print(f"{name:10s} {measured[name]:8.2f}s {limit[name]:6.2f}s {limit[name] / measured[name]:9.0%} "
              f"{measured[name] - limit[name]:6.2f}s")
    print(f"tokens/s: {tokens / measured['step']:.0f} measured, {tokens / limit['step']:.0f} bound")
    print(f"one AdamW step, same parameters and gradients: torch's per-tensor loop (its CPU default) {loop:.2f} s, "
          f"fused {fused:.2f} s: {loop / fused:.1f}× (the learner runs {'fused' if learner.optimizer.defaults.get('fused') else 'the loop'})")
    waste = max(("π_old", "training", "optimizer"), key=lambda name: measured[name] - limit[name])
    print(f"the most time over its bound: {waste} ({measured[waste] - limit[waste]:.2f} s of the step's "
          f"{measured['step']:.2f} s)")
    print("rerun: .venv/bin/python benchmarks/learner_roofline.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
