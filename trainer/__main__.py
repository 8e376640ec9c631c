"""``python -m trainer COMMAND``: the trainer without the web platform.

Each command lives in ``trainer/commands/<name>.py`` with ``add_arguments(parser)``
and ``main(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from trainer.command_line import EXIT_CANCELLED, CommandError

COMMANDS = {
    "run": "Train: a run from a preset and a promptset file; events to stdout or Redis.",
    "eval": "Evaluate a model on a promptset: best@k and pass@k, before and after one retry.",
    "evaluate": "An evaluation run for the platform (no learner): pass@k with intervals, as events.",
    "score": "Score JSON-lines responses from standard input against a Lean server.",
    "sft": "Warm-start supervised fine-tuning on demonstrations.",
    "demonstrations": "Write cold-start demonstrations (answers in the recipe's format) for the stand-in's fragment.",
    "export": "Write a checkpoint as a Hugging Face model folder.",
    "memory-plan": "Plan one rank's peak GPU memory (learner step and rollout) from the model's architecture.",
    "step-time": "Predict step time and GPU idle shares for η = 0, 1, 2 (asynchronous RL): an event-by-event simulation.",
    "lean-standin": "Serve the stand-in Lean server (the kimina-lean-server API, a small fragment decided).",
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m trainer", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # Only the chosen command's module is imported: `score` need not load torch, nor `run` the server.
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)
    module = None
    for name, help_text in COMMANDS.items():
        subparser = subparsers.add_parser(name, help=help_text, description=help_text)
        if name == chosen:
            module = importlib.import_module(f"trainer.commands.{name.replace('-', '_')}")
            module.add_arguments(subparser)
    args = parser.parse_args(argv)

    try:
        return module.main(args) or 0
    except CommandError as error:
        print(f"trainer {args.command}: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:  # Ctrl-C outside a run's own handling: no traceback for a deliberate stop
        print(f"trainer {args.command}: interrupted", file=sys.stderr)
        return EXIT_CANCELLED


if __name__ == "__main__":
    sys.exit(main())
