"""``python -m trainer evaluate``: an evaluation run for the platform (no learner), its events to Redis or stdout.

The platform's entry point for a run of kind ``eval`` (trainer/loop/evaluation_run.py). For an
evaluation from the command line, with every sample written to a file, see ``trainer eval``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainer.command_line import EXIT_CANCELLED, EXIT_FAILED
from trainer.commands.run import (
    add_config_arguments,
    add_output_arguments,
    events_sink,
    publish_cannot_start,
    read_problems,
    resolve_config,
    start_live,
    start_publisher,
    start_reporting,
    with_delivery,
)
from trainer.loop.driver import RunStatus
from trainer.loop.evaluation_run import evaluate_to_events
from trainer.observability.events import configure_sink
from trainer.ranks import check_cuda_for_gpus


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--promptset", required=True, help="Problems to evaluate on, as JSON lines.")
    add_output_arguments(parser)


def main(args: argparse.Namespace) -> int:
    sink = events_sink(args)
    return with_delivery(sink, lambda: _evaluate(args, sink))


def _evaluate(args: argparse.Namespace, sink) -> int:
    publisher = start_publisher(args, sink)
    start_live(args, publisher, sink)
    try:
        config = resolve_config(args)
        configure_sink(sink, config.events)
        check_cuda_for_gpus(config.cluster.num_gpus)
        problems = read_problems(args.promptset, "--promptset")
    except Exception as error:  # noqa: BLE001 - a run that cannot start must still tell the platform why
        raise publish_cannot_start(publisher, error) from None
    output = Path(args.output)
    start_reporting(config, output, publisher, f"evaluation {args.run_id}")

    status = evaluate_to_events(config, problems, output, publisher)
    return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)
