"""The cpu-smoke preset's model: tiny_random fine-tuned to know by heart answers to the smoke promptset.

A randomly initialised model never writes a ``<think>`` block and a ```` ```lean4 ```` block holding
the statement, so before this every cpu-smoke answer failed the format check: no proof reached Lean,
no reward was earned, no retry was made, and a smoke run checked none of the paths behind the format
check. Teaching two layers of 64 dimensions to *copy* any statement from its prompt did not work in
minutes (150 SFT steps, 23 minutes here, 0 of 54 answers well formed), so this model learns far
less: the answers to four problems (``SMOKE_PROBLEMS``, the smoke promptset), two each, with the
trainer's own SFT loop (``trainer.sft.training``). It is a plumbing check that reaches Lean, not a prover.

On the smoke promptset its answers pass the format check and go to Lean (the stand-in decides
all four statements), and the four problems are chosen so that a run meets every verdict:

- ``smoke_nat_add`` and ``smoke_int_sub``: both tactics close them, reward 1;
- ``smoke_rat_add``: ``norm_num`` closes it, ``omega`` is rejected (no ``omega`` in ℚ), so a GRPO group
  has rewards to tell apart and the rejected answers become retries;
- ``smoke_false_mul``: false, every answer is rejected and becomes a retry.

A run with ``rollout.lean_tool_calls`` ≥ 1 gets a second smoke model (``SMOKE_TOOL_RECIPE``): the same, plus one
answer to a fifth problem, ``smoke_tool_rat_half`` (``SMOKE_TOOL_PROBLEMS``, written to the promptset by
``--write-promptset … --with-lean-tool-problem``), which asks Lean inside its reasoning (trainer/rollout/lean_tool.py):
a ``<lean>`` block, the stand-in's reply exactly as a run appends it, then the proof (120 tokens: it needs
``rollout.max_response_tokens`` ≥ 128). Apart, because that long answer costs the short ones their sharpness in the
same 90 steps (a final loss of 0.05–0.09 nats a token instead of 0.016, measured here), and a default smoke run must
stay what it was.

On another promptset it writes an answer to a problem it knows, whose statement is not the prompt's,
and the format check fails it, as before.

It is built the first time a run needs it (``with_smoke_model``, called where the driver and the
``sft`` command set up) and cached under the trainer's cache folder in a folder named by a
fingerprint of everything that shapes it, as the cpu-demo's warm start is (deploy/warm_start.py): a
second run finds it and loads it at once, a change to the recipe builds a new one, and of two
processes that race for it (pytest-xdist's workers), the second waits on a file lock and then finds
it built. ``python -m trainer.sft.smoke_model`` builds it ahead of time and prints its folder;
``--write-promptset FILE`` writes the smoke promptset for ``python -m trainer run --promptset``.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from trainer.config import ModelConfig, ModelSource, RunConfig
from trainer.learning.models import TINY_RANDOM_SHAPE, smollm2_gguf_path, tiny_random_policy, trainer_cache_root
from trainer.observability.events import EventPublisher, StdoutSink
from trainer.recipe.format_reward import TOOL_CALL_CLOSE, TOOL_CALL_OPEN, check_format
from trainer.recipe.problems import DEFAULT_LEAN_HEADER, Problem
from trainer.recipe.prompts import first_attempt_messages
from trainer.recipe.retry import build_lean_feedback, retry_messages
from trainer.rollout.lean_tool import checked_snippet, reply_text, snippet_line_offset
from trainer.run.checkpoint import export_hf, latest_checkpoint
from trainer.sft.training import SupervisedFineTuning, demonstrations_fingerprint
from trainer.sft.warm_start_status import is_built
from trainer.verification.checked_code import build_checked_code
from trainer.verification.client import interpret_answer
from trainer.verification.kimina_compat import ReplResponse
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin import decide_snippet
from trainer.verification.verdicts import Verdict

SMOKE_MODELS_FOLDER = "smoke-models"
SMOKE_MODEL_SEED = 0
SMOKE_SOURCE = "smoke"
# Bump when the build changes in a way the recipe's numbers do not show.
SMOKE_MODEL_VERSION = 3


# The header as the platform stores and exports it (an upload's header loses its trailing blank line, and the
# trainer ends it with one newline), so that the prompts of a CLI run and of a platform run are the same text: a
# model that knows its answers by heart answers only the prompts it learned.
SMOKE_HEADER = DEFAULT_LEAN_HEADER.rstrip() + "\n"


def _smoke_problem(key: str, goal: str, informal: str) -> Problem:
    return Problem(problem_id=key, formal_statement=f"theorem {key} : {goal} := by", informal_statement=informal,
                   name=key, header=SMOKE_HEADER, source=SMOKE_SOURCE)


# The smoke promptset: closed arithmetic the stand-in Lean server decides (see the module's docstring).
SMOKE_PROBLEMS: tuple[Problem, ...] = (
    _smoke_problem("smoke_nat_add", "(3 : ℕ) + 4 = 7", "Show that 3 + 4 = 7 in the natural numbers."),
    _smoke_problem("smoke_int_sub", "(2 : ℤ) - 7 = -5", "Show that 2 − 7 = −5 in the integers."),
    _smoke_problem("smoke_rat_add", "(1 : ℚ) / 4 + 1 / 4 = 1 / 2", "Show that 1/4 + 1/4 = 1/2."),
    _smoke_problem("smoke_false_mul", "(3 : ℕ) * 3 = 10", "Show that 3 · 3 = 10. (False: no proof exists.)"),
)


# Lean inside the reasoning (rollout.lean_tool_calls ≥ 1): this problem's one answer asks Lean about its proof in a
# <lean> block first (trainer/rollout/lean_tool.py), reads the stand-in's reply, then answers.
SMOKE_TOOL_PROBLEMS: tuple[Problem, ...] = (
    _smoke_problem("smoke_tool_rat_half", "(1 : ℚ) / 2 + 1 / 2 = 1", "Show that 1/2 + 1/2 = 1, checking with Lean first."),
)


def problems_the_model_knows(model: ModelConfig) -> tuple[Problem, ...] | None:
    """The only problems a run of ``model`` can answer, where the model is no prover but knows answers by heart: the
    smoke model (and a checkpoint trained from it) answers the smoke problems alone; on any other prompt it writes an
    answer to one of them and the format check fails it. None: a model that attempts any statement. The launch
    checks warn from here (platform/runs/launch_contract.py)."""
    if model.source is ModelSource.TINY_SMOKE:
        return SMOKE_PROBLEMS + SMOKE_TOOL_PROBLEMS
    return None


@dataclass(frozen=True)
class SmokeRecipe:
    """What shapes the smoke model besides tiny_random's architecture: its answers and the SFT's numbers.

    Each problem gets one answer per tactic, so the model learns an even choice between them. The SFT
    numbers are the build's own (the cpu-smoke preset's ``sft`` section is for a person's SFT runs): a
    tiny random model tolerates, and needs, a far bigger step than a pretrained one, and one batch of
    every answer per step. Measured here: the loss fell from 10.8 to 0.02 nats a token by step 70 and stays
    at 0.015 (the even choice of tactic); a 6-step smoke run then sent 24 of 24 answers to Lean
    (benchmarks/asynchronous_smoke.py).
    """

    tactics: tuple[str, ...] = ("omega", "norm_num")
    learning_rate: float = 1e-2
    warmup_steps: int = 5
    steps: int = 90
    asks_lean: bool = False  # also the answer to SMOKE_TOOL_PROBLEMS that asks Lean (rollout.lean_tool_calls ≥ 1)

    def sft_config(self, answers: int) -> RunConfig:  # answers: the assistant turns learned, one batch of all
        """The cpu-smoke preset with this recipe's SFT numbers, in float32 wherever it is built (a toy gains
        nothing from bfloat16, and one precision keeps one fingerprint per recipe)."""
        return RunConfig.from_preset("cpu-smoke", {
            "model": {"source": ModelSource.TINY_RANDOM.value, "name_or_path": "tiny-random-llama",
                      "init_checkpoint": None, "dtype": "float32", "gradient_checkpointing": False},
            "sft": {"learning_rate": self.learning_rate, "warmup_steps": self.warmup_steps, "epochs": self.steps,
                    "batch_sequences": answers, "micro_batch_sequences": 4,
                    "max_sequence_tokens": 512, "checkpoint_every": 0},
        })

    def fingerprint(self) -> str:
        """A short hash of the architecture, the tokenizer's file, the demonstrations, this recipe and the
        optimizer settings it reads."""
        gguf_file = smollm2_gguf_path()
        optimizer = self.sft_config(1).optimizer.model_dump(mode="json", include={"weight_decay", "betas", "grad_clip"})
        recipe = {"shape": TINY_RANDOM_SHAPE, "tokenizer": [gguf_file.name, gguf_file.stat().st_size],
                  "demonstrations": demonstrations_fingerprint(smoke_conversations(self)),
                  # asks_lean shows in the demonstrations; left out here, the default recipe keeps its fingerprint.
                  "recipe": {k: v for k, v in dataclasses.asdict(self).items() if k != "asks_lean"}, "optimizer": optimizer, "seed": SMOKE_MODEL_SEED,
                  "version": SMOKE_MODEL_VERSION}
        return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]


SMOKE_RECIPE = SmokeRecipe()
SMOKE_TOOL_RECIPE = SmokeRecipe(asks_lean=True)


def smoke_answer(problem: Problem, tactic: str) -> str:
    """The shortest answer the cpu presets' format check passes: the tactic as reasoning, then the proof."""
    return f"<think>\n{tactic}\n</think>\n```lean4\n{problem.formal_statement}\n  {tactic}\n```"


def smoke_conversations(recipe: SmokeRecipe | None = None) -> list[list[dict]]:
    """The SFT's demonstrations: each smoke problem's first-attempt prompt answered with each tactic, and each
    answer Lean rejects followed by its retry prompt, answered with each tactic again."""
    recipe = recipe or SMOKE_RECIPE
    conversations = []
    for problem in SMOKE_PROBLEMS:
        for tactic in recipe.tactics:
            answer = smoke_answer(problem, tactic)
            conversations.append(first_attempt_messages(problem) + [{"role": "assistant", "content": answer}])
            retry = _retry_messages_after(problem, answer)
            if retry is not None:
                conversations += [retry + [{"role": "assistant", "content": smoke_answer(problem, second)}]
                                  for second in recipe.tactics]
    return conversations + (tool_call_conversations() if recipe.asks_lean else [])


SMOKE_TOOL_TACTIC = "norm_num"


def smoke_tool_call_answer(problem: Problem) -> str:
    """The answer that asks Lean inside its reasoning: the proof in a <lean> block, the stand-in's reply exactly as
    a run appends it (the verifier's reading, the tool's wording), then the proof as its final answer."""
    snippet = f"{problem.formal_statement}\n  {SMOKE_TOOL_TACTIC}"
    code = checked_snippet(problem.header, snippet)
    response = ReplResponse(id="smoke", time=0.0, response=decide_snippet(str(code)))
    verification = interpret_answer(response, code, line_numbering=LineNumbering.AFTER_HEADER, is_standin=True)
    reply = reply_text(verification, snippet_line_offset(problem.header))
    return (f"<think>\n{TOOL_CALL_OPEN}\n{snippet}\n{TOOL_CALL_CLOSE}{reply}{SMOKE_TOOL_TACTIC}\n</think>\n"
            f"```lean4\n{problem.formal_statement}\n  {SMOKE_TOOL_TACTIC}\n```")


def tool_call_conversations() -> list[list[dict]]:
    """Each tool problem's first-attempt prompt answered with its Lean tool call."""
    return [first_attempt_messages(problem) + [{"role": "assistant", "content": smoke_tool_call_answer(problem)}]
            for problem in SMOKE_TOOL_PROBLEMS]


def _retry_messages_after(problem: Problem, answer: str) -> list[dict] | None:
    """The retry prompt a run builds when the stand-in rejects ``answer``, or None when it accepts it: the run's
    own format check, checked code, the stand-in's decision as its server answers, the verifier's reading and
    the retry builder, so the model learns the prompts it will meet."""
    config = RunConfig.from_preset("cpu-smoke")
    format_check = check_format(answer, problem, config.reward)
    if not format_check.is_valid:
        raise AssertionError(f"the smoke answer for {problem.problem_id} fails the format check: {format_check.detail}")
    checked_code = build_checked_code(problem, format_check.proof_body)
    response = ReplResponse(id="smoke", time=0.0, response=decide_snippet(str(checked_code)))
    verification = interpret_answer(response, checked_code, line_numbering=LineNumbering.AFTER_HEADER, is_standin=True)
    if verification.verdict is Verdict.VALID:
        return None
    feedback = build_lean_feedback(checked_code, verification.errors, config.retry, verification.system_error)
    return retry_messages(problem, None, answer, feedback)


def _assistant_turns(conversations: list[list[dict]]) -> int:
    return sum(message["role"] == "assistant" for conversation in conversations for message in conversation)


def smoke_model_build_dir(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    root = Path(cache_root) if cache_root is not None else trainer_cache_root()
    return root / SMOKE_MODELS_FOLDER / f"tiny-smoke-{(recipe or SMOKE_RECIPE).fingerprint()}"


def smoke_model_folder(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    """The Hugging Face model folder of the smoke model (present once built)."""
    return smoke_model_build_dir(cache_root, recipe) / "model"


def build_smoke_model(cache_root: str | Path | None = None, recipe: SmokeRecipe | None = None) -> Path:
    """The smoke model's folder (``recipe``: SMOKE_RECIPE unless given), built first if absent. Safe from two
    processes at once (the second waits for the first, then finds it built) and after a kill (a half-built
    folder is never where the model is looked for)."""
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
        conversations = smoke_conversations(recipe)
        model, tokenizer = tiny_random_policy(SMOKE_MODEL_SEED)
        sft_dir = build_dir / "sft"
        shutil.rmtree(sft_dir, ignore_errors=True)  # a killed build starts over: it takes a minute, not hours
        with (build_dir / "events.jsonl").open("w") as events:
            run = SupervisedFineTuning(
                recipe.sft_config(_assistant_turns(conversations)), conversations, sft_dir,
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
            "demonstrations": len(conversations), "built_at": time.time(),
        }))
        return target


def with_smoke_model(config: RunConfig) -> RunConfig:
    """``config`` itself, or, for model.source ``tiny_smoke`` without an init_checkpoint, with
    model.init_checkpoint set to the smoke model's folder (built here on first use): every loader
    (the learner, vLLM, the memory plan) then reads one Hugging Face folder, and the run's saved
    config says which."""
    if config.model.source is not ModelSource.TINY_SMOKE or config.model.init_checkpoint:
        return config
    folder = build_smoke_model(recipe=SMOKE_TOOL_RECIPE if config.rollout.lean_tool_calls else None)
    return config.model_copy(update={"model": config.model.model_copy(update={"init_checkpoint": str(folder)})})


def write_smoke_promptset(path: str | Path, asks_lean: bool = False,
                          prior_history: dict[str, dict] | None = None) -> int:
    """The smoke promptset as JSON lines in the trainer's promptset format (``--promptset``); returns the rows.
    ``asks_lean``: with the problem answered by asking Lean (for runs with rollout.lean_tool_calls ≥ 1);
    ``prior_history``: problem id → its ``prior_*`` columns (trainer/recipe/problems.py), as an export writes them."""
    problems = [dataclasses.replace(problem, **(prior_history or {}).get(problem.problem_id, {}))
                for problem in SMOKE_PROBLEMS + (SMOKE_TOOL_PROBLEMS if asks_lean else ())]
    rows = [json.dumps(dataclasses.asdict(problem), ensure_ascii=False) for problem in problems]
    Path(path).write_text("".join(f"{row}\n" for row in rows), encoding="utf-8")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.sft.smoke_model", description=__doc__.splitlines()[0])
    parser.add_argument("--cache-root", type=Path, default=None,
                        help="Where the model is cached (default: $TRAINER_CACHE_DIR or ~/.cache/lean-rl-trainer).")
    parser.add_argument("--write-promptset", type=Path, default=None, metavar="FILE",
                        help="Also write the smoke promptset (JSON lines, for `python -m trainer run --promptset`).")
    parser.add_argument("--with-lean-tool-problem", action="store_true",
                        help="Build the model of runs with rollout.lean_tool_calls ≥ 1, and write its fifth problem too.")
    options = parser.parse_args(argv)
    asks_lean = options.with_lean_tool_problem
    if options.write_promptset is not None:
        print(f"wrote {write_smoke_promptset(options.write_promptset, asks_lean)} problems to {options.write_promptset}",
              file=sys.stderr)
    print(build_smoke_model(options.cache_root, SMOKE_TOOL_RECIPE if asks_lean else None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
