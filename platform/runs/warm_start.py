"""The cpu-demo preset's warm start, as the platform sees it: the model folder the embedded stack
builds in the background (deploy/warm_start.py) and how far the build is."""

from __future__ import annotations

from django.conf import settings

from trainer.sft.warm_start_status import read_warm_start_status

WARM_STARTED_PRESET = "cpu-demo"


def status() -> dict:
    """{"state": "ready" | "compiling" | "building" | "failed" | "absent" | "not configured", ...}: "ready" only
    once vLLM is compiled for it too (trainer/sft/warm_start_status.py)."""
    if not settings.WARM_START_MODEL:
        return {"state": "not configured"}
    return read_warm_start_status(settings.WARM_START_MODEL, settings.WARM_START_STATUS)


def starting_model(preset: str) -> str | None:
    """The warm-started model folder for a run of ``preset``, or None to use the preset's model.

    Raises ValueError with what to do when the warm start is configured but not ready: a cpu-demo
    run from the bare SmolLM2 would score 0 on every answer and look broken.
    """
    if preset != WARM_STARTED_PRESET:
        return None
    current = status()
    # While vLLM compiles the model is there: the run starts from it and compiles too (the page says it will wait).
    if current["state"] in ("ready", "compiling"):
        return current["path"]
    if current["state"] == "not configured":
        return None
    progress = f" (step {current['step']} of {current['total_steps']})" if current.get("total_steps") else ""
    raise ValueError(
        f"the cpu-demo preset starts from the warm-started SmolLM2, which is {current['state']}{progress}; "
        f"launch again once it is ready (the run command shows its progress), choose a checkpoint to start from, "
        f"or use the cpu-smoke preset"
    )
