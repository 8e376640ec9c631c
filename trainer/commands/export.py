"""``python -m trainer export``: a checkpoint as a Hugging Face model folder (config, safetensors, tokenizer)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", required=True,
                        help="A checkpoint folder (…/checkpoints/step_000005) or a run's output folder (its latest).")
    parser.add_argument("--out", required=True, help="An empty or new folder for the model.")


def main(args: argparse.Namespace) -> int:
    from trainer.checkpoint import export_hf, latest_checkpoint

    checkpoint = Path(args.checkpoint)
    if not (checkpoint / "trainer_state.pt").is_file():
        checkpoint = latest_checkpoint(checkpoint) or checkpoint
    try:
        folder = export_hf(checkpoint, args.out)
    except (FileNotFoundError, FileExistsError) as error:
        print(f"export: {error}", file=sys.stderr)
        return 2
    print(folder)
    return 0
