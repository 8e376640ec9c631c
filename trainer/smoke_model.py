"""The cpu-smoke preset's policy: a tiny Llama taught the answer format by a short SFT, built once and cached.

A randomly initialised model never writes a ``<think>`` block and a ```` ```lean4 ```` block that
holds the statement, so every answer of a smoke run failed the format check: no proof reached
Lean, no reward was earned, no retry was made, and the smoke preset checked none of those paths.
This module teaches a tiny model (``TINY_FORMAT_SHAPE``, a little wider than ``tiny_random``'s,
so that two layers can learn to copy) the cpu-smoke preset's answer format with the trainer's own
SFT loop (``trainer.sft``) on demonstrations (``trainer.demonstrations``, terse style) for
generated arithmetic statements. The statements get varied theorem names, headers and informal
lines, so the model learns to copy the statement from its prompt rather than to recite ours; a
quarter of the proofs are flawed, as a prover's first tries are, so some answers earn 1 and some
become retries.

It is built the first time a run needs it (``with_smoke_model``, called where the driver and the
``sft`` command set up) and cached under the trainer's cache folder in a folder named by a
fingerprint of everything that shapes it, as the cpu-demo's warm start is (deploy/warm_start.py):
a second run finds it and loads it at once, a change to the recipe builds a new one, and of two
processes that race for it (pytest-xdist's workers), the second waits on a file lock and then
finds it built. ``python -m trainer.smoke_model`` builds it ahead of time and prints its folder.

A toy: it has learned the shape and to copy, not mathematics; its rewards say the plumbing works.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import json
import random
import shutil
import sys
import time
from pathlib import Path

from trainer.checkpoint import export_hf, latest_checkpoint
from trainer.config import ModelSource, RunConfig
from trainer.demonstrations import AnswerStyle, demonstrations_for, generate_fragment_problems, write_demonstrations
from trainer.events import EventPublisher, StdoutSink
from trainer.models import TINY_FORMAT_SHAPE, smollm2_gguf_path, tiny_format_base_policy, trainer_cache_root
from trainer.problems import DEFAULT_LEAN_HEADER, Problem
from trainer.sft import SupervisedFineTuning
from trainer.warm_start_status import is_built

SMOKE_MODELS_FOLDER = "smoke-models"
# Statements the demonstrations are written for (one answer each), the share of answers whose
# proof Lean rejects (they become retries), and the tactics tried: three, so that the choice is
# easy for a toy and the stand-in both accepts and rejects each of them somewhere.
DEMONSTRATION_PROBLEMS = 2400
FLAWED_SHARE = 0.25
CLOSING_TACTICS = ("decide", "norm_num", "omega")
DEMONSTRATION_SEED = 11
# The SFT run's own numbers (the cpu-smoke preset's `sft` section is for a person's SFT runs on it).
# A tiny random model tolerates, and needs, a far bigger step than a pretrained one.
SMOKE_SFT = {"learning_rate": 1e-2, "warmup_steps": 10, "epochs": 1, "batch_sequences": 16,
             "micro_batch_sequences": 16, "max_sequence_tokens": 512, "checkpoint_every": 0}
SMOKE_MODEL_SEED = 0
# Bump when the build changes in a way the numbers above do not show.
SMOKE_MODEL_VERSION = 1

# Theorem names are made of these, so that no name is the only thing the model has seen.
NAME_PARTS = ("add", "mul", "sub", "div", "mod", "pow", "lt", "le", "ne", "and", "or", "not", "small", "big",
              "demo", "test", "lemma", "fact", "case", "step", "nat", "int", "rat", "false", "true", "alpha",
              "beta", "gamma", "one", "two", "sum", "prod", "eval", "check", "ex", "aux")
SHORT_HEADER = "import Mathlib"


def smoke_sft_config() -> RunConfig:
    """The cpu-smoke preset with the smoke model's SFT numbers, computing in float32 wherever it is
    built (a toy gains nothing from bfloat16, and one precision keeps one fingerprint per recipe)."""
    return RunConfig.from_preset("cpu-smoke", {
        "model": {"source": ModelSource.TINY_RANDOM.value, "init_checkpoint": None, "dtype": "float32",
                  "gradient_checkpointing": False},
        "sft": SMOKE_SFT,
    })


def recipe_fingerprint() -> str:
    """A short hash of the architecture, the tokenizer's file, the SFT settings and the demonstrations' parameters."""
    config = smoke_sft_config()
    gguf_file = smollm2_gguf_path()
    recipe = {
        "shape": TINY_FORMAT_SHAPE,
        "tokenizer": [gguf_file.name, gguf_file.stat().st_size],
        "sft": config.sft.model_dump(mode="json"),
        "optimizer": config.optimizer.model_dump(mode="json", include={"weight_decay", "betas", "grad_clip"}),
        "seed": SMOKE_MODEL_SEED,
        "demonstrations": [DEMONSTRATION_PROBLEMS, FLAWED_SHARE, list(CLOSING_TACTICS), DEMONSTRATION_SEED],
        "version": SMOKE_MODEL_VERSION,
    }
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


def smoke_model_build_dir(cache_root: str | Path | None = None) -> Path:
    root = Path(cache_root) if cache_root is not None else trainer_cache_root()
    return root / SMOKE_MODELS_FOLDER / f"tiny-format-{recipe_fingerprint()}"


def smoke_model_folder(cache_root: str | Path | None = None) -> Path:
    """The Hugging Face model folder of the smoke model (present once built)."""
    return smoke_model_build_dir(cache_root) / "model"


def _varied(problem: Problem, rng: random.Random) -> Problem:
    """The problem under a new theorem name, with the short header or the long, and sometimes no
    informal line: the prompts a smoke run meets vary in all three."""
    name = "_".join(rng.choice(NAME_PARTS) for _ in range(rng.randint(1, 3)))
    if rng.random() < 0.5:
        name += str(rng.randint(0, 99))
    return dataclasses.replace(
        problem, problem_id=name, name=name, formal_statement=problem.formal_statement.replace(problem.name, name, 1),
        header=DEFAULT_LEAN_HEADER if rng.random() < 0.5 else SHORT_HEADER,
        informal_statement=problem.informal_statement if rng.random() < 0.7 else "",
    )


def smoke_demonstrations():
    """The SFT's demonstrations: one terse answer for each generated statement, a quarter flawed."""
    rng = random.Random(DEMONSTRATION_SEED)
    problems = [_varied(problem, rng) for problem in generate_fragment_problems(DEMONSTRATION_PROBLEMS, seed=DEMONSTRATION_SEED)]
    return demonstrations_for(problems, per_problem=1, flawed_share=FLAWED_SHARE, seed=DEMONSTRATION_SEED,
                              closing_tactics=CLOSING_TACTICS, style=AnswerStyle.TERSE)


def build_smoke_model(cache_root: str | Path | None = None) -> Path:
    """The smoke model's folder, built first if absent. Safe from two processes at once (the second
    waits for the first, then finds it built) and after a kill (a half-built folder is never where
    the model is looked for)."""
    target = smoke_model_folder(cache_root)
    if is_built(target):
        return target
    build_dir = smoke_model_build_dir(cache_root)
    build_dir.mkdir(parents=True, exist_ok=True)
    with (build_dir / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the model built
        if is_built(target):
            return target
        started = time.monotonic()
        demonstrations = smoke_demonstrations()
        write_demonstrations(demonstrations, build_dir / "demonstrations.jsonl")
        model, tokenizer = tiny_format_base_policy(SMOKE_MODEL_SEED)
        sft_dir = build_dir / "sft"
        shutil.rmtree(sft_dir, ignore_errors=True)  # a killed build starts over: it takes minutes, not hours
        with (build_dir / "events.jsonl").open("w") as events:
            run = SupervisedFineTuning(
                smoke_sft_config(), [demonstration.messages() for demonstration in demonstrations], sft_dir,
                EventPublisher("smoke-model", StdoutSink(events)), model=model, tokenizer=tokenizer,
                install_signal_handlers=False,
            )
            status = run.run()
        checkpoint = latest_checkpoint(sft_dir)
        if status.value != "succeeded" or checkpoint is None:
            raise RuntimeError(f"the smoke model's fine-tuning ended {status.value}; its events are in "
                               f"{build_dir / 'events.jsonl'}")
        staging = build_dir / "model.partial"
        shutil.rmtree(staging, ignore_errors=True)
        export_hf(checkpoint, staging)
        staging.replace(target)  # complete or absent: a run never loads half a model
        shutil.rmtree(sft_dir, ignore_errors=True)
        (build_dir / "build.json").write_text(json.dumps({
            "seconds": round(time.monotonic() - started, 1), "sft_steps": run.step,
            "demonstrations": len(demonstrations), "built_at": time.time(),
        }))
        return target


def with_smoke_model(config: RunConfig) -> RunConfig:
    """``config`` itself, or, for model.source ``tiny_format`` without an init_checkpoint, with
    model.init_checkpoint set to the smoke model's folder (built here on first use): every loader
    (the learner, vLLM, the memory plan) then reads one Hugging Face folder, and the run's saved
    config says which."""
    if config.model.source is not ModelSource.TINY_FORMAT or config.model.init_checkpoint:
        return config
    folder = build_smoke_model()
    return config.model_copy(update={"model": config.model.model_copy(update={"init_checkpoint": str(folder)})})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.smoke_model", description=__doc__.splitlines()[0])
    parser.add_argument("--cache-root", type=Path, default=None,
                        help="Where the model is cached (default: $TRAINER_CACHE_DIR or ~/.cache/lean-rl-trainer).")
    options = parser.parse_args(argv)
    print(build_smoke_model(options.cache_root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
