"""``python -m trainer memory-plan``: one rank's peak GPU memory for a preset, before any GPU is taken."""

from __future__ import annotations

import argparse
import json
import sys

from trainer.commands.run import add_config_arguments, resolve_config

EXIT_BAD_ARGUMENTS = 2
EXIT_DOES_NOT_FIT = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--json", action="store_true",
                        help='Print {"preset", "model", "max_response_tokens", "ranks", "gpu_memory_gib", '
                             '"per_rank_peak_gib": {"learner", "rollout"}, "fits", "validated": '
                             '{"predicted_mib", "measured_mib"}} instead of the table.')
    parser.add_argument("--smallest-fit", action="store_true",
                        help="Instead of planning the configuration as given, find the fewest GPUs (ranks), the vLLM "
                             "tensor parallel size and share with which its model fits; prints a deploy/README.md "
                             "table row.")
    parser.add_argument("--no-validate", action="store_true",
                        help="Skip the check of the method against a real CPU measurement (validated is then null).")


def main(args: argparse.Namespace) -> int:
    from trainer import memory_plan

    try:
        config = resolve_config(args)
        if args.smallest_fit:
            sizing = memory_plan.smallest_fit(config)
            print(memory_plan.SIZING_HEADER)
            print(memory_plan.format_sizing(sizing, config))
            return 0 if sizing is not None else EXIT_DOES_NOT_FIT
        result = memory_plan.plan(config, validate=not args.no_validate)
    except ValueError as error:  # an invalid --set, a CPU preset, a model the plan does not know
        print(f"memory-plan: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(memory_plan.format_table(result))
        print(f"\nrerun: python -m trainer memory-plan --preset {config.preset}"
              + "".join(f" --set {pair}" for pair in args.overrides))
    return 0 if result.fits else EXIT_DOES_NOT_FIT
