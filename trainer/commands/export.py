"""``python -m trainer export``: a checkpoint as a Hugging Face model folder, optionally as a model
repository (bfloat16 weights and a model card) pushed to the Hub.

    python -m trainer export --checkpoint runs/12 --out model/
    python -m trainer export --checkpoint runs/12 --out model/ --push-to-hub lab/kimina-rl-1.7b   # HF_TOKEN
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trainer.command_line import EXIT_MISSING_FILE, EXIT_UNREACHABLE, CommandError
from trainer.run.checkpoint import export_hf, latest_checkpoint, step_of
from trainer.run.hub import evaluation_at, prepare_model_repo, push_folder


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="A checkpoint folder (…/checkpoints/step_000005) or a run's output folder (its latest).")
    parser.add_argument("--out", required=True, help="An empty or new folder for the model.")
    parser.add_argument("--model-repo", action="store_true",
                        help="Write a model repository: weights in bfloat16 and a model card (README.md).")
    parser.add_argument("--push-to-hub", metavar="REPO_ID",
                        help="Then push the repository to the Hub (implies --model-repo); the token is HF_TOKEN.")
    parser.add_argument("--public", action="store_true", help="With --push-to-hub: a public repository (default: private).")
    parser.add_argument("--run-name", default="", help="The run's name for the model card (default: the folder's).")
    parser.add_argument("--promptset", default="", help="What it was trained on, for the model card.")


def main(args: argparse.Namespace) -> int:
    checkpoint = Path(args.checkpoint)
    output_dir = checkpoint
    if not (checkpoint / "trainer_state.pt").is_file():
        checkpoint = latest_checkpoint(checkpoint) or checkpoint
    else:
        output_dir = checkpoint.parent.parent
    try:
        if args.model_repo or args.push_to_hub:
            step = step_of(checkpoint)
            folder = prepare_model_repo(checkpoint, args.out, run_name=args.run_name or output_dir.name,
                                        promptset=args.promptset or "a promptset of the Lean RL platform",
                                        evaluation=evaluation_at(output_dir, step) if step is not None else None)
        else:
            folder = export_hf(checkpoint, args.out)
    except (FileNotFoundError, FileExistsError) as error:
        raise CommandError(f"--checkpoint/--out: {error}", EXIT_MISSING_FILE) from None
    print(folder)
    if args.push_to_hub:
        if not os.environ.get("HF_TOKEN"):
            raise CommandError("--push-to-hub needs a Hub token with write access in HF_TOKEN")
        try:
            url = push_folder(folder, args.push_to_hub, private=not args.public, token=os.environ["HF_TOKEN"],
                              endpoint=os.environ.get("HF_ENDPOINT"))
        except Exception as error:  # noqa: BLE001 - the Hub's refusals and outages, in one line
            raise CommandError(f"--push-to-hub {args.push_to_hub}: {type(error).__name__}: {error}",
                               EXIT_UNREACHABLE) from None
        print(url)
    return 0
