"""``python -m trainer eval``: best@k and pass@k of a checkpoint, before and after one retry, as JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.commands.run import add_config_arguments, resolve_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--checkpoint", required=True,
                        help="A checkpoint folder (…/checkpoints/step_000005), a run's output folder (its latest), "
                             "or an exported Hugging Face model folder.")
    parser.add_argument("--promptset", required=True, help="Problems as JSON lines.")
    parser.add_argument("--step", type=int, default=0, help="Step number to report (default: 0).")


def model_folder(checkpoint: Path) -> Path:
    from trainer.checkpoint import MODEL_FOLDER, latest_checkpoint

    if (checkpoint / "config.json").is_file():
        return checkpoint
    if (checkpoint / MODEL_FOLDER / "config.json").is_file():
        return checkpoint / MODEL_FOLDER
    latest = latest_checkpoint(checkpoint)
    if latest is not None:
        return latest / MODEL_FOLDER
    raise FileNotFoundError(
        f"--checkpoint {str(checkpoint)!r} is neither a checkpoint, a run folder with checkpoints, "
        "nor a Hugging Face model folder"
    )


def main(args: argparse.Namespace) -> int:
    from trainer.config import RunConfig
    from trainer.events import EventPublisher, ListSink
    from trainer.problems import load_problems_jsonl

    try:
        checkpoint = Path(args.checkpoint)
        folder = model_folder(checkpoint)
        if not args.config and not args.preset and (folder.parent / "run_config.json").is_file():
            args.config = str(folder.parent / "run_config.json")
        config = resolve_config(args)
        config = RunConfig.model_validate(
            {**config.model_dump(mode="python"), "model": {**config.model.model_dump(), "init_checkpoint": str(folder)}}
        )
        problems = load_problems_jsonl(args.promptset)
    except Exception as error:
        print(f"eval: {error}", file=sys.stderr)
        return 2

    from trainer.driver import TrainingRun

    evaluation = TrainingRun(config, problems, Path("."), EventPublisher("eval", ListSink()), install_signal_handlers=False)
    try:
        evaluation.prepare_for_evaluation()
        values = evaluation.evaluate(args.step)
    finally:
        evaluation.tear_down()
    print(json.dumps(values, indent=2, sort_keys=True))
    return 0
