"""How far a warm start's build is: the one reader of its status file.

The builder (deploy/warm_start.py) writes ``status.json`` beside the model folder it fills; the
embedded stack and the platform's launch checks (platform/runs/warm_start.py) read it here, so
the two cannot disagree on when the model is ready. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

STATUS_FILE = "status.json"


def is_built(model_folder: str | Path) -> bool:
    """Ready once the exported Hugging Face folder has its config (written last)."""
    return (Path(model_folder) / "config.json").is_file()


def read_warm_start_status(model_folder: str | Path, status_file: str | Path | None) -> dict:
    """{"state": "ready" | "building" | "failed" | "absent", "step", "total_steps", "path", "message"}."""
    path = str(model_folder)
    if is_built(model_folder):
        return {"state": "ready", "path": path}
    if status_file is not None:
        try:
            return {**json.loads(Path(status_file).read_text()), "path": path}
        except (OSError, ValueError):
            pass  # not written yet, or being rewritten this very moment
    return {"state": "absent", "path": path}
