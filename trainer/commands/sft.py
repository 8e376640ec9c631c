"""``python -m trainer sft``: warm-start supervised fine-tuning, publishing events to stdout or Redis.

From a demonstrations file (``--demonstrations``), or, as the platform's runs of kind "sft"
do, from a promptset (``--promptset``): its problems get generated demonstrations
(``trainer.demonstrations``), written to ``<output>/demonstrations.jsonl`` for the record.
The fine-tuned model is ``<output>/checkpoints/step_N/model``; RUN_FINISHED names it as
``model_path``, the folder an RL run takes as ``model.init_checkpoint``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.commands.run import EXIT_BAD_ARGUMENTS, EXIT_CANCELLED, EXIT_FAILED, add_config_arguments, resolve_config

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
    parser.add_argument("--output", required=True, help="Folder for checkpoints and the resolved config.")
    parser.add_argument("--events", default="stdout", help="'stdout' (JSON lines) or a redis:// URL.")
    parser.add_argument("--run-id", default="local", help="The run's id in event streams (default: local).")
    parser.add_argument("--resume", action="store_true", help="Continue from the latest checkpoint in --output.")
    parser.add_argument("--attempt", type=int, default=1,
                        help="Which dispatch of the run this is (1, then one more per resume); every event carries "
                             "it, so the platform can ignore what an earlier attempt still sends (default: 1).")


def load_conversations(args: argparse.Namespace, config, output: Path) -> list[list[dict]]:
    from trainer.sft import load_demonstrations

    if args.demonstrations:
        return load_demonstrations(args.demonstrations)
    from trainer.demonstrations import demonstrations_for, write_demonstrations
    from trainer.problems import load_problems_jsonl

    problems = load_problems_jsonl(args.promptset)
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
    from trainer.events import EventPublisher, EventType, sink_from_url

    try:
        sink = sink_from_url(args.events, args.run_id)
    except ValueError as error:
        print(f"--events: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    output = Path(args.output)
    first_seq = 0
    if args.resume:
        from trainer.driver import first_event_seq_for_resume

        first_seq = first_event_seq_for_resume(output)
    try:
        publisher = EventPublisher(args.run_id, sink, first_seq=first_seq, attempt=args.attempt)
    except ValueError as error:
        print(f"--attempt: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    try:
        config = resolve_config(args)
        conversations = load_conversations(args, config, output)
    except Exception as error:  # a run that cannot start must still tell the platform why
        reason = f"cannot start: {error}"
        print(reason, file=sys.stderr)
        publisher.publish(EventType.ERROR, {"step": 0, "message": reason})
        publisher.publish(EventType.RUN_FINISHED, {"status": "failed", "reason": reason, "step": 0, "kind": "sft"})
        return EXIT_BAD_ARGUMENTS

    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(config.to_json_dict(), indent=2))
    from trainer.driver import RunStatus
    from trainer.sft import SupervisedFineTuning

    status = SupervisedFineTuning(config, conversations, output, publisher, resume=args.resume).run()
    return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)
