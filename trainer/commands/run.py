"""``python -m trainer run``: train a policy on a promptset, publishing events to stdout or Redis."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_FAILED = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_CANCELLED = 143  # 128 + SIGTERM, as a shell reports a process stopped by it


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """--preset / --config / --set / --lean-url: shared by ``run`` and ``eval``."""
    parser.add_argument("--preset", default=None, help="A named preset, e.g. cpu-demo or h100x8 (default: h100x8).")
    parser.add_argument("--config", default=None, help="A resolved RunConfig JSON file (the platform writes one).")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
        help="Override one field; VALUE is read as JSON when it parses, else as text. Repeatable.",
    )
    parser.add_argument("--lean-url", default=None, help="Lean server base URL (sets verifier.url).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--promptset", required=True, help="Problems as JSON lines (the platform's export).")
    parser.add_argument("--eval-promptset", default=None, help="Problems to evaluate on (default: the promptset).")
    parser.add_argument("--output", required=True, help="Folder for checkpoints and the resolved config.")
    parser.add_argument("--events", default="stdout", help="'stdout' (JSON lines) or a redis:// URL.")
    parser.add_argument("--run-id", default="local", help="The run's id in event streams (default: local).")
    parser.add_argument("--resume", action="store_true", help="Continue from the latest checkpoint in --output.")


def parse_overrides(pairs: list[str]) -> dict:
    """``["optimizer.learning_rate=1e-5"]`` → ``{"optimizer": {"learning_rate": 1e-5}}``."""
    nested: dict = {}
    for pair in pairs:
        path, separator, raw = pair.partition("=")
        if not separator or "." not in path:
            raise ValueError(f"--set expects SECTION.FIELD=VALUE, got {pair!r}; e.g. --set optimizer.learning_rate=1e-5")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        *sections, name = path.split(".")
        target = nested
        for section in sections:
            target = target.setdefault(section, {})
        target[name] = value
    return nested


def resolve_config(args: argparse.Namespace):
    """The run's RunConfig from --config or --preset, then --set and --lean-url, validated once."""
    from trainer.config import RunConfig, _deep_merge

    overrides = parse_overrides(args.overrides)
    if args.lean_url:
        overrides = _deep_merge(overrides, {"verifier": {"url": args.lean_url}})
    api_key = os.environ.get("LEAN_SERVER_API_KEY")
    if api_key:
        # Never stored in the config file; Ray passes it in the job's environment.
        overrides = _deep_merge(overrides, {"verifier": {"api_key": api_key}})
    if args.config:
        if args.preset:
            raise ValueError("give --preset or --config, not both; --config is already a resolved preset")
        base = json.loads(Path(args.config).read_text())
        return RunConfig.from_saved(_deep_merge(base, overrides))
    return RunConfig.from_preset(args.preset or "h100x8", overrides)


def main(args: argparse.Namespace) -> int:
    from trainer.distributed import RankEventPublisher, check_launch_fits_config, torchrun_position
    from trainer.events import EventPublisher, EventType, sink_from_url

    try:
        sink = sink_from_url(args.events, args.run_id)
    except ValueError as error:
        print(f"--events: {error}", file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    try:
        position = torchrun_position()  # None unless torchrun started this process as one of several ranks
    except ValueError as error:
        print(str(error), file=sys.stderr)
        return EXIT_BAD_ARGUMENTS
    output = Path(args.output)
    first_seq = 0
    if args.resume:
        from trainer.driver import first_event_seq_for_resume

        first_seq = first_event_seq_for_resume(output)
    if position is None:
        publisher = EventPublisher(args.run_id, sink, first_seq=first_seq)
    else:
        publisher = RankEventPublisher(args.run_id, sink, first_seq, rank=position.rank, world_size=position.world_size)
    try:
        config = resolve_config(args)
        check_launch_fits_config(config, position)
        from trainer.problems import load_problems_jsonl

        problems = load_problems_jsonl(args.promptset)
        eval_problems = load_problems_jsonl(args.eval_promptset) if args.eval_promptset else None
    except Exception as error:  # a run that cannot start must still tell the platform why
        reason = f"cannot start: {error}"
        print(reason, file=sys.stderr)
        publisher.publish(EventType.ERROR, {"step": 0, "message": reason})
        publisher.publish(EventType.RUN_FINISHED, {"status": "failed", "reason": reason, "step": 0})
        return EXIT_BAD_ARGUMENTS

    output.mkdir(parents=True, exist_ok=True)
    if position is None or position.rank == 0:
        (output / "run_config.json").write_text(json.dumps(config.to_json_dict(), indent=2))
    from trainer.driver import RunStatus, TrainingRun

    if position is None:
        status = TrainingRun(
            config, problems, output, publisher, eval_problems=eval_problems, resume=args.resume
        ).run()
    else:
        from trainer.distributed import run_data_parallel

        status = run_data_parallel(
            config, problems, output, publisher, position, eval_problems=eval_problems, resume=args.resume
        )
    return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)
