"""A tiny Llama taught the answer format by a short SFT, built once and cached: meant for cpu-smoke.

A randomly initialised model never writes a ``<think>`` block and a ```` ```lean4 ```` block that
holds the statement, so every answer of a cpu-smoke run fails the format check: no proof reaches
Lean, no reward is earned, no retry is made. This module builds the model meant to fix that
(model.source ``tiny_format``): ``TINY_FORMAT_SHAPE``, a little wider than ``tiny_random``'s,
fine-tuned with the trainer's own SFT loop (``trainer.sft``) on demonstrations
(``trainer.demonstrations``, terse style) for generated arithmetic statements under varied theorem
names, headers and informal lines, so that it must learn to copy the statement from its prompt, a
quarter of the proofs flawed so that some answers would become retries.

Not there yet, measured: ``SMOKE_RECIPE`` (150 SFT steps of 16 answers) took 23 minutes on this
project's two shared cores and left a model that copies nothing (0 of 54 greedy answers pass the
format check); the cpu-smoke preset therefore keeps ``tiny_random``. What is here and
works: the build, its cache and the resolution a run makes of it.

It is built the first time a run needs it (``with_smoke_model``, called where the driver and the
``sft`` command set up) and cached under the trainer's cache folder in a folder named by a
fingerprint of everything that shapes it, as the cpu-demo's warm start is (deploy/warm_start.py):
a second run finds it and loads it at once, a change to the recipe builds a new one, and of two
processes that race for it (pytest-xdist's workers), the second waits on a file lock and then
finds it built. ``python -m trainer.smoke_model`` builds it ahead of time and prints its folder.
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
from dataclasses import dataclass
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
SMOKE_MODEL_SEED = 0
# Bump when the build changes in a way the recipe's numbers do not show.
SMOKE_MODEL_VERSION = 1


@dataclass(frozen=True)
class SmokeRecipe:
    """What shapes the smoke model besides its architecture: the demonstrations and the SFT's numbers.

    ``problems`` statements get one terse answer each; ``flawed_share`` of the proofs are ones Lean
    rejects (they would become retries); three closing tactics keep the choice easy for a toy. The SFT
    numbers are the build's own (the cpu-smoke preset's ``sft`` section is for a person's SFT runs):
    a tiny random model tolerates, and needs, a far bigger step than a pretrained one.
    """

    problems: int = 2400
    flawed_share: float = 0.25
    closing_tactics: tuple[str, ...] = ("decide", "norm_num", "omega")
    demonstration_seed: int = 11
    learning_rate: float = 1e-2
    warmup_steps: int = 10
    epochs: int = 1
    batch_sequences: int = 16

    def sft_config(self) -> RunConfig:
        """The cpu-smoke preset with this recipe's SFT numbers, computing in float32 wherever it is
        built (a toy gains nothing from bfloat16, and one precision keeps one fingerprint per recipe)."""
        return RunConfig.from_preset("cpu-smoke", {
            "model": {"source": ModelSource.TINY_RANDOM.value, "init_checkpoint": None, "dtype": "float32",
                      "gradient_checkpointing": False},
            "sft": {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps, "epochs": self.epochs,
                    "batch_sequences": self.batch_sequences, "micro_batch_sequences": self.batch_sequences,
                    "max_sequence_tokens": 512, "checkpoint_every": 0},
        })

    def fingerprint(self) -> str:
        """A short hash of the architecture, the tokenizer's file, this recipe and the optimizer settings it reads."""
        gguf_file = smollm2_gguf_path()
        optimizer = self.sft_config().optimizer.model_dump(mode="json", include={"weight_decay", "betas", "grad_clip"})
        recipe = {"shape": TINY_FORMAT_SHAPE, "tokenizer": [gguf_file.name, gguf_file.stat().st_size],
                  "recipe": dataclasses.asdict(self), "optimizer": optimizer, "seed": SMOKE_MODEL_SEED,
                  "version": SMOKE_MODEL_VERSION}
        return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


SMOKE_RECIPE = SmokeRecipe()

# Theorem names are made of these, so that no name is the only thing the model has seen.
NAME_PARTS = ("add", "mul", "sub", "div", "mod", "pow", "lt", "le", "ne", "and", "or", "not", "small", "big",
              "demo", "test", "lemma", "fact", "case", "step", "nat", "int", "rat", "false", "true", "alpha",
              "beta", "gamma", "one", "two", "sum", "prod", "eval", "check", "ex", "aux")
SHORT_HEADER = "import Mathlib"


def smoke_model_build_dir(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    root = Path(cache_root) if cache_root is not None else trainer_cache_root()
    return root / SMOKE_MODELS_FOLDER / f"tiny-format-{(recipe or SMOKE_RECIPE).fingerprint()}"


def smoke_model_folder(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    """The Hugging Face model folder of the smoke model (present once built)."""
    return smoke_model_build_dir(cache_root, recipe) / "model"


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


def smoke_demonstrations(recipe: SmokeRecipe | None = None):
    """The SFT's demonstrations: one terse answer for each generated statement, some flawed."""
    recipe = recipe or SMOKE_RECIPE
    rng = random.Random(recipe.demonstration_seed)
    problems = [_varied(problem, rng)
                for problem in generate_fragment_problems(recipe.problems, seed=recipe.demonstration_seed)]
    return demonstrations_for(problems, per_problem=1, flawed_share=recipe.flawed_share, seed=recipe.demonstration_seed,
                              closing_tactics=recipe.closing_tactics, style=AnswerStyle.TERSE)


def build_smoke_model(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    """The smoke model's folder (``recipe``: SMOKE_RECIPE unless given), built first if absent. Safe from two processes at once (the second
    waits for the first, then finds it built) and after a kill (a half-built folder is never where
    the model is looked for)."""
    recipe = recipe or SMOKE_RECIPE
    target = smoke_model_folder(cache_root, recipe)
    if is_built(target):
        return target
    build_dir = smoke_model_build_dir(cache_root, recipe)
    build_dir.mkdir(parents=True, exist_ok=True)
    with (build_dir / "build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a second builder waits here, then finds the model built
        if is_built(target):
            return target
        started = time.monotonic()
        demonstrations = smoke_demonstrations(recipe)
        write_demonstrations(demonstrations, build_dir / "demonstrations.jsonl")
        model, tokenizer = tiny_format_base_policy(SMOKE_MODEL_SEED)
        sft_dir = build_dir / "sft"
        shutil.rmtree(sft_dir, ignore_errors=True)  # a killed build starts over: it takes minutes, not hours
        with (build_dir / "events.jsonl").open("w") as events:
            run = SupervisedFineTuning(
                recipe.sft_config(), [demonstration.messages() for demonstration in demonstrations], sft_dir,
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
