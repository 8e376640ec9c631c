"""``python -m trainer demonstrations``: write cold-start demonstrations for the stand-in's fragment.

For a promptset's problems (``--promptset``), or for freshly generated closed arithmetic
statements (``--generate N``), held apart from any promptset. Prints a summary of the
stand-in's verdicts on the demonstrated proofs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from trainer.observability.progress import progress_bar
from trainer.recipe.problems import load_problems_jsonl
from trainer.sft.demonstrations import demonstrations_for, generate_fragment_problems, write_demonstrations


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--promptset", default=None, help="Problems as JSON lines (the platform's export).")
    source.add_argument("--generate", type=int, default=None, metavar="N",
                        help="Generate N closed arithmetic statements from the stand-in's fragment.")
    parser.add_argument("--per-problem", type=int, default=2, help="Demonstrations per problem (default: 2).")
    parser.add_argument("--flawed-share", type=float, default=0.25,
                        help="Share of true statements' demonstrations whose proof Lean rejects (default: 0.25).")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="The JSON-lines file to write.")


def main(args: argparse.Namespace) -> int:
    try:
        if args.promptset:
            problems = load_problems_jsonl(args.promptset)
        else:
            problems = generate_fragment_problems(args.generate, seed=args.seed)
        # The stand-in checks several proofs per problem (about 10 ms): a large promptset takes minutes.
        with progress_bar(iterable=problems, total=len(problems), desc="demonstrations", unit="problem") as shown:
            demonstrations = demonstrations_for(shown, args.per_problem, args.flawed_share, seed=args.seed)
    except (OSError, ValueError) as error:
        print(f"demonstrations: {error}", file=sys.stderr)
        return 2
    if not demonstrations:
        print(f"demonstrations: none of the {len(problems)} problems lies in the stand-in's fragment", file=sys.stderr)
        return 2
    count = write_demonstrations(demonstrations, args.out)
    verdicts = Counter(demonstration.expected_verdict.value for demonstration in demonstrations)
    covered = len({demonstration.problem.problem_id for demonstration in demonstrations})
    print(f"wrote {count} demonstrations for {covered} of {len(problems)} problems to {args.out} "
          f"(stand-in verdicts: {dict(verdicts)})")
    return 0
