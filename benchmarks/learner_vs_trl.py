"""Learner step throughput (response tokens per second): our Dr.GRPO learner vs TRL's GRPOTrainer.

Same tiny random Llama (SmolLM2's tokenizer), same batch, lengths, micro-batch size,
AdamW settings and gradient clipping, in one process, one after the other.

TRL's trainer cannot be stepped without generating, so its side times exactly the part
that corresponds to our ``Learner.step``: ``GRPOTrainer.compute_loss`` on prepared inputs
(loss_type="dr_grpo", beta=0) for every micro-batch, backward, gradient clipping and one
AdamW step. TRL takes π_old from the same forward pass when it trains once per batch,
while our learner recomputes π_old in an extra no-grad pass before the first update (it
must, with several mini-batches per batch); the report shows the ratio both with and
without that pass.

Rerun: .venv/bin/python benchmarks/learner_vs_trl.py [--sequences 16] [--prompt-tokens 64]
       [--response-tokens 64] [--micro-batch 4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.timing import median_seconds
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def make_batch(args, vocab_size: int, seed: int = 0):
    import torch

    from trainer.learning.batching import TrainingSequence

    generator = torch.Generator().manual_seed(seed)
    sequences = []
    for index in range(args.sequences):
        prompt = torch.randint(100, vocab_size, (args.prompt_tokens,), generator=generator).tolist()
        response = torch.randint(100, vocab_size, (args.response_tokens,), generator=generator).tolist()
        advantage = float(torch.rand((), generator=generator) - 0.5)
        sequences.append(TrainingSequence(prompt, response, advantage, group_key="all", rollout_key=str(index)))
    return sequences


def time_ours(args, sequences, tokenizer, model, *, skip_old_logprob_pass: bool) -> float:
    from trainer.config import RunConfig
    from trainer.learning.learner import Learner

    config = RunConfig.from_preset("cpu-demo", {
        "model": {"source": "tiny_random", "dtype": "float32", "gradient_checkpointing": False},
        "rollout": {"prompts_per_step": 1, "samples_per_prompt": args.sequences,
                    "max_response_tokens": args.response_tokens},
        "optimizer": {"learning_rate": 1e-6, "mini_batch_prompts": 1, "micro_batch_sequences": args.micro_batch},
    })
    learner = Learner(config, model, tokenizer)
    if skip_old_logprob_pass:
        def same_pass_old_logprobs(batches):
            return _detached_current_logprobs(learner, batches)

        learner.old_logprobs = same_pass_old_logprobs
    return median_seconds(lambda: learner.step(sequences), args.repeats)


def _detached_current_logprobs(learner, batches):
    import torch

    # Timing only: zeros in place of π_old change the loss values, not the work per token, so
    # this variant measures the step without the extra no-grad pass.
    return {id(s): torch.zeros(len(s.response_ids)) for batch in batches for s in batch}


def time_trl(args, sequences, tokenizer, model) -> float:
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    with tempfile.TemporaryDirectory() as output_dir:
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=lambda completions, **kwargs: [0.0] * len(completions),
            args=GRPOConfig(
                output_dir=output_dir, loss_type="dr_grpo", beta=0.0, epsilon=0.2, epsilon_high=0.3,
                per_device_train_batch_size=args.micro_batch, num_generations=args.micro_batch,
                gradient_accumulation_steps=args.sequences // args.micro_batch,
                max_completion_length=args.response_tokens, learning_rate=1e-6, weight_decay=0.01,
                max_grad_norm=1.0, use_cpu=True, bf16=False, report_to="none", logging_steps=10_000,
            ),
            train_dataset=Dataset.from_dict({"prompt": ["x"] * args.sequences}),
            processing_class=tokenizer,
        )
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = args.sequences // args.micro_batch
        optimizer = torch.optim.AdamW(trainer.model.parameters(), lr=1e-6, weight_decay=0.01, betas=(0.9, 0.999))
        micro_batches = []
        for start in range(0, len(sequences), args.micro_batch):
            micro = sequences[start : start + args.micro_batch]
            micro_batches.append({
                "prompt_ids": torch.tensor([s.prompt_ids for s in micro]),
                "prompt_mask": torch.ones(len(micro), args.prompt_tokens, dtype=torch.long),
                "completion_ids": torch.tensor([s.response_ids for s in micro]),
                "completion_mask": torch.ones(len(micro), args.response_tokens, dtype=torch.long),
                "advantages": torch.tensor([s.advantage for s in micro]),
                "num_items_in_batch": torch.tensor(float(len(sequences) * args.response_tokens)),
            })

        def one_step():
            optimizer.zero_grad()
            for inputs in micro_batches:
                trainer.compute_loss(trainer.model, inputs).backward()
            torch.nn.utils.clip_grad_norm_(trainer.model.parameters(), 1.0)
            optimizer.step()

        return median_seconds(one_step, args.repeats)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--response-tokens", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.sequences % args.micro_batch:
        parser.error("--sequences must be a multiple of --micro-batch")

    import torch

    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0)
    sequences = make_batch(args, len(tokenizer))
    tokens = args.sequences * args.response_tokens
    ours = time_ours(args, sequences, tokenizer, tiny_random_policy(0, tokenizer)[0], skip_old_logprob_pass=False)
    ours_same_pass = time_ours(args, sequences, tokenizer, tiny_random_policy(0, tokenizer)[0], skip_old_logprob_pass=True)
    trl = time_trl(args, sequences, tokenizer, model)

    print(f"batch: {args.sequences} sequences x ({args.prompt_tokens} prompt + {args.response_tokens} response) tokens, "
          f"micro-batch {args.micro_batch}, torch threads {torch.get_num_threads()}, median of {args.repeats}")
    print(f"TRL GRPOTrainer (dr_grpo) compute_loss+backward+AdamW: {tokens / trl:10.1f} tokens/s  ({trl:.3f} s)")
    print(f"ours, Learner.step with the π_old pass:                {tokens / ours:10.1f} tokens/s  ({ours:.3f} s)")
    print(f"ours, π_old from the same pass (as TRL here):          {tokens / ours_same_pass:10.1f} tokens/s  ({ours_same_pass:.3f} s)")
    print(f"ratio ours/TRL: {trl / ours:.2f}x with the π_old pass, {trl / ours_same_pass:.2f}x without")
    print("rerun: .venv/bin/python benchmarks/learner_vs_trl.py " + " ".join(sys.argv[1:] if argv is None else argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
