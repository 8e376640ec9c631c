"""``python -m trainer sft``: warm-start supervised fine-tuning, publishing events to stdout or Redis.

From a demonstrations file (``--demonstrations``), or, as the platform's runs of kind "sft"
do, from a promptset (``--promptset``): its problems get generated demonstrations
(``trainer.sft.demonstrations``), written to ``<output>/demonstrations.jsonl`` for the record.
The fine-tuned model is ``<output>/checkpoints/step_N/model``; RUN_FINISHED names it as
``model_path``, the folder an RL run takes as ``model.init_checkpoint``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trainer.command_line import EXIT_CANCELLED, EXIT_FAILED, EXIT_MALFORMED_INPUT, CommandError, existing_file
from trainer.commands.run import (
    add_config_arguments,
    add_output_arguments,
    events_sink,
    publish_cannot_start,
    read_problems,
    resolve_config,
    start_publisher,
    start_reporting,
    with_delivery,
)
from trainer.loop.driver import RunStatus
from trainer.observability.events import configure_sink
from trainer.ranks import check_cuda_for_gpus
from trainer.sft.demonstrations import demonstrations_for, write_demonstrations
from trainer.sft.smoke_model import with_smoke_model
from trainer.sft.training import SupervisedFineTuning, load_demonstrations

DEMONSTRATIONS_FILE = "demonstrations.jsonl"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--demonstrations", default=None,
                        help="JSON lines: {'messages': [...]} or {'formal_statement', 'response'} per line.")
    source.add_argument("--promptset", default=None,
                        help="Problems as JSON lines (the platform's export); demonstrations are generated for them.")
    parser.add_argument("--per-problem", type=int, default=2,
                        help="With --promptset: demonstrations generated per problem (default: 2).")
    parser.add_argument("--flawed-share", type=float, default=0.25,
                        help="With --promptset: share of demonstrations whose proof Lean rejects (default: 0.25).")
    add_output_arguments(parser)


def load_conversations(args: argparse.Namespace, config, output: Path) -> list[list[dict]]:
    if args.demonstrations:
        existing_file(args.demonstrations, "--demonstrations")
        try:
            return load_demonstrations(args.demonstrations)
        except ValueError as error:
            raise CommandError(f"--demonstrations {error}", EXIT_MALFORMED_INPUT) from None

    problems = read_problems(args.promptset, "--promptset")
    demonstrations = demonstrations_for(
        problems, per_problem=args.per_problem, flawed_share=args.flawed_share, seed=config.schedule.seed
    )
    if not demonstrations:
        raise ValueError(
            f"none of the {len(problems)} problems in {args.promptset} lies in the stand-in's fragment (closed "
            "arithmetic statements), so no demonstrations could be generated; pass --demonstrations FILE instead"
        )
    output.mkdir(parents=True, exist_ok=True)
    write_demonstrations(demonstrations, output / DEMONSTRATIONS_FILE)
    return [demonstration.messages() for demonstration in demonstrations]


def main(args: argparse.Namespace) -> int:
    sink = events_sink(args)
    return with_delivery(sink, lambda: _run(args, sink))


def _run(args: argparse.Namespace, sink) -> int:
    output = Path(args.output)
    publisher = start_publisher(args, sink)
    try:
        config = with_smoke_model(resolve_config(args))  # the cpu-smoke preset's model, built on first use
        configure_sink(sink, config.events)
        check_cuda_for_gpus(config.cluster.num_gpus)
        conversations = load_conversations(args, config, output)
    except Exception as error:  # noqa: BLE001 - a run that cannot start must still tell the platform why
        raise publish_cannot_start(publisher, error, kind="sft") from None

    start_reporting(config, output, publisher, f"sft {args.run_id}")

    status = SupervisedFineTuning(config, conversations, output, publisher, resume=args.resume).run()
    return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)
