"""How far a warm start's build is: the one reader of its status file.

The builder (deploy/warm_start.py) writes ``status.json`` beside the model folder it fills; the
embedded stack and the platform's launch checks (platform/runs/warm_start.py) read it here, so
the two cannot disagree on when the model is ready. Standard library only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

STATUS_FILE = "status.json"
# Beside the model folder: written by the builder once it has started the cpu-demo's vLLM engine on the warm start,
# so vLLM's compiled graphs are in the compile caches (or once it found there is nothing to compile). Until then a
# cpu-demo run would compile for itself and wait about two minutes in Starting: the warm start is not ready yet.
VLLM_CACHE_MARK = "vllm-compile-cache.json"
COMPILE_CACHE_VARIABLES = ("VLLM_CACHE_ROOT", "TORCHINDUCTOR_CACHE_DIR")
COMPILING_MESSAGE = ("compiling vLLM for the warm start (about two minutes); a cpu-demo run launched now compiles it "
                     "too, and waits that long in Starting")


def compile_caches(environment: Mapping[str, str]) -> dict[str, str]:
    """Where ``environment`` keeps the compile caches ("" for a library's default)."""
    return {name: environment.get(name, "") for name in COMPILE_CACHE_VARIABLES}


def vllm_cache_mark(model_folder: str | Path) -> Path:
    return Path(model_folder).parent / VLLM_CACHE_MARK


def is_vllm_compiled(model_folder: str | Path, environment: Mapping[str, str]) -> bool:
    """Whether the builder has filled (or had nothing to fill in) the compile caches ``environment`` names."""
    try:
        mark = json.loads(vllm_cache_mark(model_folder).read_text())
    except (OSError, ValueError):
        return False
    return mark.get("caches") == compile_caches(environment)


def is_built(model_folder: str | Path) -> bool:
    """Ready once the exported Hugging Face folder has its config (written last)."""
    return (Path(model_folder) / "config.json").is_file()


def read_warm_start_status(model_folder: str | Path, status_file: str | Path | None,
                           environment: Mapping[str, str] | None = None) -> dict:
    """{"state": "ready" | "compiling" | "building" | "failed" | "absent", "step", "total_steps", "path", "message"}.

    Ready means what a person launching a cpu-demo run expects of it: the model is built and vLLM is compiled for it in
    the compile caches ``environment`` (this process's by default, which the stack hands to every run) names."""
    path = str(model_folder)
    if is_built(model_folder):
        if is_vllm_compiled(model_folder, os.environ if environment is None else environment):
            return {"state": "ready", "path": path}
        return {"state": "compiling", "path": path, "message": COMPILING_MESSAGE}
    if status_file is not None:
        try:
            return {**json.loads(Path(status_file).read_text()), "path": path}
        except (OSError, ValueError):
            pass  # not written yet, or being rewritten this very moment
    return {"state": "absent", "path": path}
