"""What a launch leaves for the trainer, read as the trainer reads it."""

import argparse

from runs.actions import export_run_inputs
from trainer.commands.run import resolve_config


def trainers_config(run):
    """The config as the trainer reads it: the file the dispatch writes, through ``python -m trainer run --config``."""
    export_run_inputs(run)
    return resolve_config(argparse.Namespace(config=str(run.artifacts_dir / "config.json"), preset=None,
                                             overrides=[], lean_url=None))
