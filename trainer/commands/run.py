"""``python -m trainer run``: train a policy on a promptset, publishing events to stdout or Redis."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from trainer.command_line import (
    EXIT_BAD_ARGUMENTS,
    EXIT_CANCELLED,
    EXIT_FAILED,
    EXIT_MALFORMED_INPUT,
    EXIT_UNREACHABLE,
    CommandError,
    config_error,
    existing_file,
    warn_if_events_destination_is_down,
)
from trainer.commands import event_target
from trainer.config import RunConfig, _deep_merge
from trainer.fields import parse_config_assignments
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.loop.ray_driver import drive
from trainer.observability.events import (
    EventPublisher,
    EventsUnavailable,
    EventType,
    configure_sink,
    finish_delivery,
    sink_from_url,
)
from trainer.observability.live import live_sink_for
from trainer.observability.progress import show_progress
from trainer.observability.ray_metrics import export_to_ray
from trainer.observability.tracking import attach_trackers
from trainer.cluster.placement import PLACEMENT_GROUP_VARIABLE, run_placement
from trainer.ranks import RankPosition, check_cuda_for_gpus, check_launch_fits_config, torchrun_position
from trainer.recipe.problems import load_problems_jsonl
from trainer.run.checkpoint import first_event_seq_for_resume


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """--preset / --config / --set / --lean-url: shared by ``run`` and ``eval``."""
    parser.add_argument("--preset", default=None, help="A named preset, e.g. cpu-demo or h100x8 (default: h100x8).")
    parser.add_argument("--config", default=None, help="A resolved RunConfig JSON file (the platform writes one).")
    parser.add_argument(
        "--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
        help="Override one field; VALUE is read as JSON when it parses, else as text. Repeatable.",
    )
    parser.add_argument("--lean-url", default=None, help="Lean server base URL (sets verifier.url).")


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """--output / --events / --run-id / --resume / --attempt: where a training command writes, shared by
    ``run`` and ``sft``."""
    parser.add_argument("--output", required=True, help="Folder for checkpoints and the resolved config.")
    parser.add_argument("--events", default="stdout", help="'stdout' (JSON lines), a redis:// URL, or env:NAME to read the URL from the environment "
                        "variable NAME (keeps a password off the command line).")
    parser.add_argument("--run-id", default="local", help="The run's id in event streams (default: local).")
    parser.add_argument("--resume", action="store_true", help="Continue from the latest checkpoint in --output.")
    parser.add_argument("--attempt", type=int, default=1,
                        help="Which dispatch of the run this is (1, then one more per resume); every event carries "
                             "it, so the platform can ignore what an earlier attempt still sends (default: 1).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--promptset", required=True, help="Problems as JSON lines (the platform's export).")
    parser.add_argument("--eval-promptset", default=None, help="Problems to evaluate on (default: the promptset).")
    add_output_arguments(parser)


def parse_overrides(pairs: list[str]) -> dict:
    """``["optimizer.learning_rate=1e-5"]`` → ``{"optimizer": {"learning_rate": 1e-5}}`` (read by trainer/fields.py)."""
    return parse_config_assignments(pairs)


def resolve_config(args: argparse.Namespace):
    """The run's RunConfig from --config or --preset, then --set and --lean-url, validated once.

    Every mistake is a CommandError naming the option (and, for an unknown field, the valid ones)."""
    from pydantic import ValidationError

    try:
        return _resolve_config(args)
    except CommandError:
        raise
    except ValidationError as error:
        raise config_error(error) from None
    except ValueError as error:
        raise CommandError(str(error), EXIT_BAD_ARGUMENTS) from None


def _resolve_config(args: argparse.Namespace):
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
        try:
            base = json.loads(existing_file(args.config, "--config").read_text())
        except json.JSONDecodeError as error:
            raise CommandError(f"--config {args.config}: not JSON ({error.msg}, line {error.lineno}); give the "
                               "run_config.json a run wrote", EXIT_MALFORMED_INPUT) from None
        return RunConfig.from_saved(_deep_merge(base, overrides))
    return RunConfig.from_preset(args.preset or "h100x8", overrides)


def read_problems(path: str, option: str):
    """The problems of a JSON Lines file given to ``option``; a missing file or a bad line is a CommandError."""
    existing_file(path, option)
    try:
        return load_problems_jsonl(path)
    except ValueError as error:
        raise CommandError(f"{option} {error}", EXIT_MALFORMED_INPUT) from None


def events_sink(args: argparse.Namespace):
    try:
        url = event_target.resolve(args.events)  # env:NAME keeps a Redis password off the command line
        sink = sink_from_url(url, args.run_id)
    except ValueError as error:
        raise CommandError(f"--events: {error}", EXIT_BAD_ARGUMENTS) from None
    warn_if_events_destination_is_down(url, shown=args.events)
    return sink


def publish_cannot_start(publisher, error: Exception, **finished) -> CommandError:
    """Tell the platform why the run never started (its events are its only voice), as a CommandError."""
    failure = error if isinstance(error, CommandError) else CommandError(str(error), EXIT_BAD_ARGUMENTS)
    reason = f"cannot start: {failure}"
    publisher.publish(EventType.ERROR, {"step": 0, "message": reason})
    publisher.publish(EventType.RUN_FINISHED, {"status": "failed", "reason": reason, "step": 0, **finished})
    return failure


def driver_world(config) -> RankPosition | None:
    """The learner ranks the driver starts, as the launch check reads them (None: one rank, which runs alone)."""
    ranks = run_placement(config).learner_ranks
    return RankPosition(rank=0, world_size=ranks, local_rank=0) if ranks > 1 else None


def with_delivery(sink, body) -> int:
    """``body()``'s exit code, once whatever the sink still buffers (the run's last events, or why it
    could not start) has gone out; a run whose events cannot be delivered has failed."""
    problem = None
    try:
        code = body()
    except EventsUnavailable:
        code = EXIT_FAILED  # finish_delivery says why
    finally:
        problem = finish_delivery(sink)
    if problem:
        raise CommandError(f"the run failed: {problem}", EXIT_UNREACHABLE)
    return code


def main(args: argparse.Namespace) -> int:
    sink = events_sink(args)
    try:
        position = torchrun_position()  # None unless torchrun started this process as one of several ranks
    except ValueError as error:
        raise CommandError(str(error), EXIT_BAD_ARGUMENTS) from None
    return with_delivery(sink, lambda: _run(args, sink, position))


def first_event_seq(args: argparse.Namespace) -> int:
    """The number of this process's first event: a rank placed by the driver numbers after the driver's own events
    (``first_event_seq``, which the driver sets); on --resume, after the checkpoint's; else 0."""
    given = getattr(args, "first_event_seq", None)
    if given is not None:
        return given
    return first_event_seq_for_resume(Path(args.output)) if args.resume else 0


def start_publisher(args: argparse.Namespace, sink, position=None):
    """The training command's publisher: on --resume its events number on from the checkpoint's, every one
    carries --attempt, and under torchrun each rank publishes as itself."""
    if args.attempt < 1:  # here, not in argparse: every mistake is one `trainer COMMAND:` line
        raise CommandError(f"--attempt must be 1 or more (a run's first dispatch is attempt 1), got {args.attempt}")
    first_seq = first_event_seq(args)
    if position is None:
        return EventPublisher(args.run_id, sink, first_seq=first_seq, attempt=args.attempt)
    from trainer.loop.distributed import RankEventPublisher

    return RankEventPublisher(args.run_id, sink, first_seq, rank=position.rank, world_size=position.world_size,
                              attempt=args.attempt)


def start_live(args: argparse.Namespace, publisher, sink) -> None:
    """Answers stream while they are written (trainer/observability/live.py): on stdout among the other events, or on the
    run's Redis live channel, never its durable stream."""
    publisher.live = live_sink_for(event_target.resolve(args.events), args.run_id, sink)


def start_reporting(config, output: Path, publisher, title: str) -> None:
    """What the (first rank of a) training command does before its first step: the resolved config beside
    the checkpoints, then the trackers, the progress bar and Ray's metrics listening to its events."""
    output.mkdir(parents=True, exist_ok=True)
    (output / "run_config.json").write_text(json.dumps(config.to_json_dict(), indent=2))

    attach_trackers(publisher, config, output)
    show_progress(publisher, title)
    export_to_ray(publisher)


def _run(args: argparse.Namespace, sink, position) -> int:
    """The run: as the driver of its actors (several learner ranks or a rollout pool, trainer/loop/ray_driver.py),
    as one learner rank of them (``position``, which the driver's rank actor passes), or as one process."""
    output = Path(args.output)
    publisher = start_publisher(args, sink, position)
    start_live(args, publisher, sink)
    is_driver = False
    try:
        config = resolve_config(args)
        configure_sink(sink, config.events)
        # A rank the driver placed is never a driver itself, one learner rank fed by a pool (WORLD_SIZE 1) included.
        is_placed_rank = PLACEMENT_GROUP_VARIABLE in os.environ
        is_driver = position is None and not is_placed_rank and run_placement(config).needs_actors
        # The driver holds no GPU: it checks the ranks it will start, each rank its own CUDA.
        check_launch_fits_config(config, driver_world(config) if is_driver else position)
        if not is_driver:
            check_cuda_for_gpus(config.cluster.num_gpus)
        problems = read_problems(args.promptset, "--promptset")
        eval_problems = read_problems(args.eval_promptset, "--eval-promptset") if args.eval_promptset else None
    except Exception as error:  # noqa: BLE001 - a run that cannot start must still tell the platform why
        raise publish_cannot_start(publisher, error) from None
    if is_driver:  # the problems were read to fail here, at start-up; each rank reads its own
        return drive(args, config, sink, publisher, rank_body=_run, first_seq=first_event_seq(args))

    output.mkdir(parents=True, exist_ok=True)
    if position is None or position.rank == 0:
        start_reporting(config, output, publisher, f"run {args.run_id}")

    if position is None:
        status = TrainingRun(
            config, problems, output, publisher, eval_problems=eval_problems, resume=args.resume
        ).run()
    else:
        from trainer.loop.distributed import run_data_parallel

        status = run_data_parallel(
            config, problems, output, publisher, position, eval_problems=eval_problems, resume=args.resume
        )
    return {RunStatus.SUCCEEDED: 0, RunStatus.CANCELLED: EXIT_CANCELLED}.get(status, EXIT_FAILED)
