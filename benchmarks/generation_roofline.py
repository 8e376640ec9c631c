"""How close each rollout engine comes to what this machine allows for the run's model: a roofline, in one run.

A decoding step of ``B`` answers in flight runs every weight matrix of the model once on a (B, hidden)
activation, and reads each layer's key/value cache for every answer. So one step cannot take less than

    the matmuls' time   Σ over the model's linear layers of the time of that (B × k) @ (k × n) matmul,
                        timed on this machine, at the run's dtype and torch threads (the tied head included)
    plus the cache read  2 (keys and values) × layers × key/value heads × head size × mean context × B × bytes,
                        moved at this machine's memory bandwidth (a timed copy: bytes read + bytes written / s)

and the bound is ``B / that`` tokens per second. Attention's own arithmetic, the sampler and the
engine's bookkeeping are left out: the bound is optimistic, and a share of it is an honest upper
estimate of the time an engine wastes. The pure weight-streaming bound (all weights and the cache read
once a step at the copy's bandwidth) is printed beside it: on a CPU with caches larger than a layer's
weights the timed matmuls are the tighter and truer bound.

Each engine (built by ``build_engine`` from the cpu-demo config, as in
benchmarks/vllm_vs_transformers_rollout.py) then samples ``--prompts`` × ``--samples`` answers of at most
``--tokens`` tokens; its tokens/s (median of ``--repeats`` batches after a warm-up) is printed as a share of
the bound measured just before and just after that engine in the same process (their mean), so a busy machine
lowers both and the share stays readable. The load average is printed before and after every figure. The transformers engine runs first: vLLM's CPU worker
replaces ``torch.set_num_threads`` with a no-op for the rest of the process when it starts.

The arithmetic (``decode_matmuls``, ``cache_bytes_per_step``, ``decode_bound``) is pure and tested in
tests/benchmarks/test_the_generation_roofline_counts_every_decode_matmul_and_the_cache_read.py.

Rerun: .venv/bin/python benchmarks/generation_roofline.py [--prompts 4] [--samples 4] [--tokens 128]
       [--repeats 2] [--threads N] [--engines transformers vllm] [--eager]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "platform")]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


@dataclass(frozen=True)
class DecoderShape:
    """What a decoding step's cost depends on, read from a Hugging Face Llama-style config."""

    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_size: int
    vocab: int

    @classmethod
    def of(cls, config) -> DecoderShape:
        heads = config.num_attention_heads
        return cls(layers=config.num_hidden_layers, hidden=config.hidden_size, intermediate=config.intermediate_size,
                   heads=heads, kv_heads=getattr(config, "num_key_value_heads", None) or heads,
                   head_size=getattr(config, "head_dim", None) or config.hidden_size // heads, vocab=config.vocab_size)


@dataclass(frozen=True)
class Matmul:
    """``count`` matmuls of a (batch × k) activation by a (k × n) weight in one decoding step."""

    name: str
    batch: int
    k: int
    n: int
    count: int

    @property
    def weight_elements(self) -> int:
        return self.k * self.n * self.count


def decode_matmuls(shape: DecoderShape, batch: int) -> list[Matmul]:
    """Every linear layer one decoding step of ``batch`` answers runs: per layer the query, key, value and output
    projections and the gated MLP's gate, up and down; once, the output head over the vocabulary."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1 answer in flight, got {batch}")
    q = shape.heads * shape.head_size
    kv = shape.kv_heads * shape.head_size
    per_layer = [("query", shape.hidden, q), ("key", shape.hidden, kv), ("value", shape.hidden, kv),
                 ("output", q, shape.hidden), ("gate", shape.hidden, shape.intermediate),
                 ("up", shape.hidden, shape.intermediate), ("down", shape.intermediate, shape.hidden)]
    matmuls: dict[tuple[int, int], Matmul] = {}
    for name, k, n in per_layer:  # same-shaped layers are timed once and counted as many times as they run
        known = matmuls.get((k, n))
        matmuls[(k, n)] = (Matmul(f"{known.name}+{name}", batch, k, n, known.count + shape.layers) if known
                           else Matmul(name, batch, k, n, shape.layers))
    head = matmuls.get((shape.hidden, shape.vocab))
    matmuls[(shape.hidden, shape.vocab)] = (Matmul(f"{head.name}+head", batch, shape.hidden, shape.vocab, head.count + 1)
                                            if head else Matmul("head", batch, shape.hidden, shape.vocab, 1))
    return list(matmuls.values())


def cache_bytes_per_step(shape: DecoderShape, batch: int, mean_context: float, dtype_bytes: int) -> float:
    """Bytes of keys and values one decoding step reads: every layer's cache for every answer, at the mean context."""
    return 2 * shape.layers * shape.kv_heads * shape.head_size * mean_context * batch * dtype_bytes


def weight_bytes(matmuls: list[Matmul], dtype_bytes: int) -> int:
    return sum(m.weight_elements for m in matmuls) * dtype_bytes


@dataclass(frozen=True)
class DecodeBound:
    step_seconds: float  # the timed matmuls plus the cache read at the copy's bandwidth
    tokens_per_s: float  # batch / step_seconds
    weight_streaming_tokens_per_s: float  # batch × bandwidth / (weights + cache): memory alone


def decode_bound(batch: int, matmul_seconds: dict[str, float], matmuls: list[Matmul], cache_bytes: float,
                 weight_bytes_per_step: float, bandwidth_bytes_per_s: float) -> DecodeBound:
    """The fastest a step of ``batch`` answers can go: ``matmul_seconds`` holds one timed call of each of
    ``matmuls`` by name, counted as often as a step runs it, and the cache read at ``bandwidth_bytes_per_s``."""
    if bandwidth_bytes_per_s <= 0:
        raise ValueError(f"the bandwidth must be positive, got {bandwidth_bytes_per_s}")
    missing = [m.name for m in matmuls if m.name not in matmul_seconds]
    if missing:
        raise ValueError(f"no timing for the matmuls {', '.join(missing)}; time every shape decode_matmuls lists")
    step = sum(matmul_seconds[m.name] * m.count for m in matmuls) + cache_bytes / bandwidth_bytes_per_s
    return DecodeBound(step_seconds=step, tokens_per_s=batch / step,
                       weight_streaming_tokens_per_s=batch * bandwidth_bytes_per_s / (weight_bytes_per_step + cache_bytes))


# --- measurements --------------------------------------------------------------------------------------------


def load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} (1/5 min)"


def copy_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes read plus bytes written per second by a copy of ``megabytes`` MiB, far beyond the caches."""
    import torch

    from benchmarks.timing import median_seconds

    source = torch.ones(megabytes * 2**20, dtype=torch.uint8)
    target = torch.empty_like(source)
    seconds = median_seconds(lambda: target.copy_(source), repeats)
    return 2 * source.numel() / seconds


_UNCACHED_BYTES = 256 * 2**20


def time_matmuls(matmuls: list[Matmul], dtype, calls: int = 50, repeats: int = 5) -> dict[str, float]:
    """Seconds of one call of each shape, as ``torch.nn.functional.linear`` runs it (weights stored (n, k), as
    ``nn.Linear`` keeps them): the median over ``repeats`` of ``calls`` calls in a row, each weight distinct so
    the timing pays for reading it, as a decoding step does."""
    import torch

    from benchmarks.timing import median_seconds

    seconds = {}
    with torch.inference_mode():
        for matmul in matmuls:
            activation = torch.randn(matmul.batch, matmul.k, dtype=dtype)
            # Enough distinct weights to overflow the caches (a step reads ~all its weights from memory), cycled.
            copies = max(2, -(-_UNCACHED_BYTES // (matmul.k * matmul.n * activation.element_size())))
            weights = [torch.randn(matmul.n, matmul.k, dtype=dtype) for _ in range(copies)]
            count = max(calls, copies)

            def run(weights=weights, activation=activation, count=count):
                for index in range(count):
                    torch.nn.functional.linear(activation, weights[index % len(weights)])

            seconds[matmul.name] = median_seconds(run, repeats) / count
            del weights
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="torch threads for everything (default: torch's own)")
    parser.add_argument("--engines", nargs="*", default=["transformers", "vllm"], choices=["transformers", "vllm"])
    parser.add_argument("--eager", action="store_true", help="vLLM without torch.compile (rollout.vllm_enforce_eager)")
    args = parser.parse_args()

    import torch

    from benchmarks.cpu_rollout_precision import demo_prompts
    from benchmarks.vllm_vs_transformers_rollout import config_for, measure
    from trainer.compute_dtype import compute_dtype_of
    from trainer.learning.models import load_policy

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"machine: {os.cpu_count()} CPUs, torch {torch.__version__}, {torch.get_num_threads()} torch threads; "
          f"{load_average()} at the start", flush=True)
    config = config_for("transformers", args)
    model, tokenizer = load_policy(config.model, seed=0)
    dtype = getattr(torch, compute_dtype_of(config).dtype)
    dtype_bytes = torch.empty((), dtype=dtype).element_size()
    prompts = demo_prompts(tokenizer, args.prompts)
    prompt_ids = [tokenizer(prompt, add_special_tokens=False)["input_ids"] for prompt in prompts]
    batch = args.prompts * args.samples
    mean_context = statistics.mean(len(ids) for ids in prompt_ids) + args.tokens / 2
    shape = DecoderShape.of(model.config)
    matmuls = decode_matmuls(shape, batch)

    def roofline() -> DecodeBound:
        before = load_average()
        bandwidth = copy_bandwidth()
        timings = time_matmuls(matmuls, dtype)
        bound = decode_bound(batch, timings, matmuls, cache_bytes_per_step(shape, batch, mean_context, dtype_bytes),
                             weight_bytes(matmuls, dtype_bytes), bandwidth)
        print(f"\nroofline ({before} before, {load_average()} after): {config.model.name_or_path}, "
              f"{compute_dtype_of(config).dtype}, {shape.layers} layers, {batch} answers in flight, mean context "
              f"{mean_context:.0f} tokens, {torch.get_num_threads()} torch threads")
        print(f"  copy bandwidth {bandwidth / 1e9:.1f} GB/s (read + write)")
        for matmul in matmuls:
            rate = 2 * matmul.batch * matmul.k * matmul.n / timings[matmul.name]
            print(f"  {matmul.name:14s} ({matmul.batch}×{matmul.k})@({matmul.k}×{matmul.n}) ×{matmul.count:3d}/step "
                  f"{timings[matmul.name] * 1e6:8.1f} µs  {rate / 1e9:6.1f} GFLOP/s  "
                  f"{matmul.k * matmul.n * dtype_bytes / timings[matmul.name] / 1e9:6.1f} GB/s of weights")
        print(f"  bound: {bound.step_seconds * 1e3:.1f} ms a step, {bound.tokens_per_s:.0f} tokens/s "
              f"(weights streamed at the copy's bandwidth alone: {bound.weight_streaming_tokens_per_s:.0f} tokens/s)",
              flush=True)
        return bound

    # The bound is measured just before and just after each engine, and the engine's share is of their mean: on a
    # machine others use, the load changes within minutes, and both figures must see the same machine.
    rows = []
    for name in args.engines:
        bound_before = roofline()
        before = load_average()
        figures = measure(name, args, model, tokenizer, prompt_ids)
        after = load_average()
        bound = (bound_before.tokens_per_s + roofline().tokens_per_s) / 2
        rows.append(f"{name:13s} {figures['build_s']:8.1f}s {figures['tokens']:13.0f} {figures['batch_s']:7.1f}s "
                    f"{figures['tokens_per_s']:9.1f} {bound:7.0f} {figures['tokens_per_s'] / bound:8.0%}   "
                    f"{torch.get_num_threads():4d}     {before} → {after}")
        print(f"\n{rows[-1]}", flush=True)
    print(f"\n{'engine':13s} {'start-up':>9s} {'tokens/batch':>13s} {'batch':>8s} {'tokens/s':>9s} {'bound':>7s} "
          f"{'of bound':>9s}  threads  load before → after")
    print("\n".join(rows))
    print("rerun: .venv/bin/python benchmarks/generation_roofline.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
