"""``python -m trainer eval``: pass@k, best@k and mean@n of a checkpoint, before and after one retry, as JSON.

Two scores per sample, each with its own metric names: ours, the gated reward (``pass@k``: the
format check passed and Lean accepted), and the release's ``acc`` (``acc/pass@k``: Lean accepted
the answer's proof, format check not applied), which is what the release's pass@k counts. The
output says how censored samples were handled; ``--output`` writes every sample as a JSON line,
so the numbers can be audited.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainer.commands.run import add_config_arguments, resolve_config
from trainer.config import RunConfig
from trainer.loop.driver import TrainingRun
from trainer.loop.evaluation import CENSORED_HANDLING, METRIC_FAMILIES
from trainer.observability.events import DiscardSink, EventPublisher
from trainer.ranks import check_cuda_for_gpus
from trainer.recipe.problems import load_problems_jsonl
from trainer.run.checkpoint import MODEL_FOLDER, latest_checkpoint


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--checkpoint", required=True,
                        help="A checkpoint folder (…/checkpoints/step_000005), a run's output folder (its latest), "
                             "or an exported Hugging Face model folder (then give --config or --preset).")
    parser.add_argument("--promptset", required=True, help="Problems as JSON lines.")
    parser.add_argument("--step", type=int, default=0,
                        help="Step number the report is labelled with (default: 0); it does not change the sampling.")
    parser.add_argument("--seed", type=int, default=None,
                        help="Sampling seed (default: the config's schedule.seed). A run's own evaluation at step N "
                             "sampled with schedule.seed + N: pass that to reproduce it.")
    parser.add_argument("--output", default=None,
                        help="Write every sample (first attempts and retries: scores, verdict, reasons, the answer) "
                             "to this file as JSON lines.")


def model_folder(checkpoint: Path) -> Path:
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


def run_config_path(folder: Path) -> Path:
    """The run's resolved config saved beside the model, or an error that says what to pass instead."""
    saved = folder.parent / "run_config.json"
    if saved.is_file():
        return saved
    raise FileNotFoundError(
        f"no run_config.json beside the model in {str(folder)!r}, so the run's settings are unknown; "
        "pass --config FILE (a run's resolved run_config.json) or --preset NAME (e.g. cpu-demo) to say which apply"
    )


def main(args: argparse.Namespace) -> int:
    try:
        checkpoint = Path(args.checkpoint)
        folder = model_folder(checkpoint)
        if not args.config and not args.preset:
            args.config = str(run_config_path(folder))
        config = resolve_config(args)
        config = RunConfig.model_validate(
            {**config.model_dump(mode="python"), "model": {**config.model.model_dump(), "init_checkpoint": str(folder)}}
        )
        check_cuda_for_gpus(config.cluster.num_gpus)
        problems = load_problems_jsonl(args.promptset)
        output = Path(args.output) if args.output else None
        if output is not None and not output.parent.is_dir():
            raise FileNotFoundError(f"--output {args.output!r}: the folder {str(output.parent)!r} does not exist")
    except Exception as error:  # noqa: BLE001 - any mistake in the inputs: one line and exit code 2, no traceback
        print(f"eval: {error}", file=sys.stderr)
        return 2

    seed = config.schedule.seed if args.seed is None else args.seed
    evaluation = TrainingRun(config, problems, Path("."), EventPublisher("eval", DiscardSink()), install_signal_handlers=False)
    try:
        evaluation.prepare_for_evaluation()
        values = evaluation.evaluate(args.step, seed=seed, show_progress=True)
    finally:
        evaluation.tear_down()
    if output is not None:
        with output.open("w", encoding="utf-8") as samples:
            for record in evaluation.evaluation_samples:
                samples.write(json.dumps(record, ensure_ascii=False) + "\n")
    report = {
        "step": args.step,
        "seed": seed,
        "checkpoint": str(folder),
        "samples_per_problem": config.schedule.eval_samples,
        "metrics": values,
        "metric_names": {f"{prefix}pass@k": meaning for prefix, meaning in METRIC_FAMILIES.items()},
        "censored_handling": CENSORED_HANDLING,
        "samples_file": str(output) if output is not None else None,
    }
    print(json.dumps(report, indent=2, sort_keys=True))
    return 0
