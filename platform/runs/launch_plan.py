"""What a launch will do, read off the resolved config before anything is stored: each preset's description, the
value and allowed range of every settable field, and the summary above the Launch button.

Every word and figure here comes from the config ``trainer.config.RunConfig.from_preset`` resolves, the model
registry (``runs.models.RegisteredModel``), the memory plan (trainer/memory/memory_fit.py) and the step-time model
(trainer/step_time/): nothing is restated by hand, because a page that restates a preset drifts from it (the
launch page went on calling cpu-smoke's model "a tiny random model" after it became the smoke model, issue 37).
The form (runs/forms.py), the page's script (through ``json_script``) and ``GET /api/runs/launch-summary`` all
read it from here.
"""

from __future__ import annotations

import functools
from typing import Any

from runs import actions, group_launch, launch_contract
from runs.launch_contract import SETTABLE_FIELDS, number_text
from runs.models import LearnerPlan, RegisteredModel, RunKind
from trainer.command_line import CommandError
from trainer.commands.step_time import predict
from promptsets.models import PromptsetVersion
from trainer.config import EVAL_EVERY_MEANING, PRESETS, ModelConfig, RunConfig
from trainer.learning.models import load_tokenizer
from trainer.memory import memory_fit
from trainer.memory.memory_plan import plan
from trainer.recipe.problems import Problem
from trainer.step_time.inputs import MEASURED_RUNS, preset_inputs


def setting(config: RunConfig, name: str) -> Any:
    """A settable field's value in a resolved config (None where the preset leaves it unset)."""
    settable = SETTABLE_FIELDS[name]
    return getattr(getattr(config, settable.section), settable.field)


# What a blank field means where the preset leaves the setting unset: the schedule ends by the other one.
UNSET_MEANS = {
    "total_steps": "none: the epochs end the run",
    "total_epochs": "none: the steps end the run",
}


def field_values(config: RunConfig) -> dict[str, dict[str, str]]:
    """Each settable field as the form shows it for ``config``'s preset: its value, its allowed range (that
    preset's alone) and the input's min and max, all written by ``number_text``."""
    fields = {}
    for name, bound in launch_contract.bounds(config.preset).items():
        value = setting(config, name)
        fields[name] = {
            "value": "" if value is None else number_text(value),
            "placeholder": UNSET_MEANS.get(name, "") if value is None else number_text(value),
            "allowed": f"Allowed for {config.preset}: {bound.describe()}.",
            "min": number_text(bound.low), "max": number_text(bound.high),
        }
    return fields


def blank_choices(config: RunConfig) -> dict[str, str]:
    """What a blank choice means for ``config``'s preset, as the select's first option says it."""
    entry = registered_model(config)
    return {"model": f"the preset's ({entry.name if entry else config.model.name_or_path})",
            "rollout_engine": f"the preset's ({config.rollout.engine.value}"
                              + (f", or {config.rollout.engine_fallback.value} where it cannot run)"
                                 if config.rollout.engine_fallback else ")"),
            "retry_history": f"the preset's ({config.retry.history.value})",
            "data_selection": f"the preset's ({config.data.selection.value})",
            "error_correction": f"the preset's ({'on' if config.schedule.eval_error_correction else 'off'})"}


def registered_model(config: RunConfig) -> RegisteredModel | None:
    """The registry's entry for the config's model, if an administrator keeps one."""
    return (RegisteredModel.objects.filter(source=config.model.source.value, name_or_path=config.model.name_or_path)
            .order_by("-is_enabled", "name").first())


def _plural(count: int, word: str, words: str = "") -> str:
    return f"{number_text(count, grouped=True)} {word if count == 1 else words or word + 's'}"


def _where(config: RunConfig) -> str:
    cluster = config.cluster
    if cluster.num_gpus == 0:
        return f"on CPU ({_plural(cluster.cpus_per_worker, 'core')}, no GPU)"
    return f"on {number_text(cluster.num_gpus)} GPUs of {number_text(cluster.gpu_memory_gib)} GiB"


def _schedule_words(config: RunConfig) -> str:
    schedule = config.schedule
    ends = []
    if schedule.total_steps is not None:
        ends.append(_plural(schedule.total_steps, "step"))
    if schedule.total_epochs is not None:
        ends.append(_plural(schedule.total_epochs, "pass", "passes") + " over the promptset")
    return " or ".join(ends) + (", whichever comes first" if len(ends) > 1 else "")


def describe_preset(preset: str) -> str:
    """The preset in one paragraph, generated from it: its model's registry entry and its sizes."""
    config = RunConfig.from_preset(preset)
    entry = registered_model(config)
    model = (f"{entry.name} ({entry.description.rstrip('.')})" if entry and entry.description
             else entry.name if entry else f"{config.model.name_or_path} (not in the model registry)")
    rollout = config.rollout
    return (f"{preset}: {model}, {_where(config)}; "
            f"{_plural(rollout.prompts_per_step, 'prompt')} × {_plural(rollout.samples_per_prompt, 'answer')} a step, "
            f"each answer up to {_plural(rollout.max_response_tokens, 'token')}; {_schedule_words(config)}.")


class _NotPlannedYet(Exception):
    pass


def _stored_learner_plan(config: RunConfig):
    """The learner plan an earlier launch stored; none is made here: making one is a fake-tensor run of the whole
    model (half a minute of CPU for h100x8), the launch's to pay, not every look at the form."""
    stored = LearnerPlan.objects.of(config).first()
    if stored is None:
        raise _NotPlannedYet
    return stored.learner_memory()


def memory_verdict(config: RunConfig) -> str:
    """The memory plan's verdict on ``config``, as the launch will check it (runs.actions.resolve_config)."""
    try:
        problems = memory_fit.check_fits(config, learner_plan=_stored_learner_plan)
    except _NotPlannedYet:
        return ("not planned yet: the launch plans it (a fake-tensor run of the model, about half a minute the first "
                "time) and refuses a run that would not fit before any GPU is taken")
    if problems:
        return "the launch would refuse it: " + "; ".join(problems)
    if config.cluster.num_gpus == 0:
        return "fits: a CPU run holds no GPU memory"
    memory = plan(config, learner=_stored_learner_plan(config))
    peak = max(memory.learner_peak_gib, memory.rollout_peak_gib)
    return f"fits: at most {peak:.1f} GiB per GPU, of the {memory.usable_gib:.1f} GiB a GPU may use"


def step_time_estimate(config: RunConfig) -> tuple[str, str]:
    """(value, note): a CPU preset's step time from the step-time model fed with its measured run's speeds, or
    "not measured" where no run of the preset was measured (h100x8's inputs are published and assumed figures)."""
    if config.preset not in MEASURED_RUNS:
        return "not measured", "no run of this preset was measured on its hardware"
    try:
        inputs = preset_inputs(config)
        prediction = predict(config, inputs, config.rollout.max_staleness, steps=20)
    except CommandError as error:
        return "not measured", str(error)
    if not prediction["runs"]:
        return "not measured", prediction["reason"]
    seconds = prediction["step_time_s"]
    shown = f"about {seconds:.1f} s" if seconds < 120 else f"about {seconds / 60:.1f} min"
    return shown, (
        f"an estimate, not a measurement: the step-time model (trainer/step_time/) with the speeds measured in "
        f"{MEASURED_RUNS[config.preset]} (decoding {inputs.decode_tokens_per_s_per_sequence:.1f} tokens/s per answer, "
        f"the learner {inputs.learner_tokens_per_s_per_device:.1f} tokens/s); {inputs.lean_reach_share:.0%} of that "
        f"run's answers reached Lean, so Lean's time is counted as that run's")


# What an evaluation run (kind eval) never does: train. Its summary leaves these rows out and says what it samples.
TRAINING_ONLY_PATHS = ("schedule.total_steps", "schedule.total_epochs", "rollout.prompts_per_step",
                       "rollout.samples_per_prompt", "optimizer.learning_rate", "schedule.eval_every",
                       "schedule.checkpoint_every", "cluster.rollout_gpus", "rollout.max_staleness")
TRAINING_ONLY_LABELS = ("Proofs sent to Lean per step", "Step time")


def summary(config: RunConfig, kind: str = RunKind.RL) -> list[dict[str, str]]:
    """The rows above the Launch button. A row read off the config carries its ``path`` (the page marks the
    figure with it, and the browser test holds each against the API's resolved config). An evaluation's rows are
    what it samples, without the training schedule it does not have."""
    rows = _rows(config)
    if kind != RunKind.EVAL:
        return rows
    schedule = config.schedule
    evaluation_rows = [
        {"label": "Samples per problem", "value": number_text(schedule.eval_samples), "path": "schedule.eval_samples",
         "note": "the k of pass@k"},
        {"label": "Error correction", "value": "on" if schedule.eval_error_correction else "off",
         "path": "", "note": "one retry per failed first attempt" if schedule.eval_error_correction
         else "first attempts only"},
    ]
    kept = [row for row in rows if row["path"] not in TRAINING_ONLY_PATHS and row["label"] not in TRAINING_ONLY_LABELS]
    return kept[:2] + evaluation_rows + kept[2:]


def _rows(config: RunConfig) -> list[dict[str, str]]:
    rollout = config.rollout
    entry = registered_model(config)

    def figure(label: str, path: str, note: str = "", *, unset: str = "none") -> dict[str, str]:
        section, field = path.split(".")
        value = getattr(getattr(config, section), field)
        shown = unset if value is None else value if isinstance(value, str) else number_text(value, grouped=True)
        return {"label": label, "value": shown, "path": path, "note": note}

    answers = rollout.prompts_per_step * rollout.samples_per_prompt
    step_time, step_time_note = step_time_estimate(config)
    return [
        figure("Model", "model.name_or_path", entry.description if entry else "not in the model registry"),
        figure("Rollout engine", "rollout.engine",
               f"{rollout.engine_fallback.value} on a node that cannot run it (the run's page says so)"
               if rollout.engine_fallback else ""),
        figure("Training steps", "schedule.total_steps", unset=UNSET_MEANS["total_steps"]),
        figure("Passes over the promptset", "schedule.total_epochs", unset=UNSET_MEANS["total_epochs"]),
        figure("Prompts per step", "rollout.prompts_per_step"),
        figure("Answers per prompt", "rollout.samples_per_prompt"),
        figure("Longest answer, tokens", "rollout.max_response_tokens"),
        figure("Learning rate", "optimizer.learning_rate"),
        figure("Evaluate every", "schedule.eval_every", EVAL_EVERY_MEANING),
        figure("Checkpoint every", "schedule.checkpoint_every", "steps; 0: only at the end"),
        figure("GPUs", "cluster.num_gpus", _where(config) if config.cluster.num_gpus == 0
               else f"of {number_text(config.cluster.gpu_memory_gib)} GiB each"),
        figure("Rollout GPUs", "cluster.rollout_gpus", "0: every GPU generates, then learns"),
        figure("Staleness η", "rollout.max_staleness", "0: the release's synchronous loop"),
        {"label": "Memory plan", "value": memory_verdict(config), "path": "", "note": ""},
        {"label": "Proofs sent to Lean per step", "value": f"at most {number_text(answers, grouped=True)}",
         "path": "", "figure": str(answers),
         "note": (f"prompts per step × answers per prompt = {number_text(rollout.prompts_per_step)} × "
                  f"{number_text(rollout.samples_per_prompt)}; an answer that fails the format check never reaches "
                  f"Lean")},
        {"label": "Step time", "value": step_time, "path": "", "note": step_time_note},
    ]


def preset_pages() -> dict[str, dict[str, Any]]:
    """Per preset, what the launch page shows when it is chosen (handed to the page's script by json_script)."""
    pages = {}
    for preset in PRESETS:
        config = RunConfig.from_preset(preset)
        pages[preset] = {"description": describe_preset(preset), "fields": field_values(config),
                         "blankChoices": blank_choices(config), "summary": summary(config)}
    return pages


# A summary needs neither a name nor a promptset (neither changes the config), nor a checkpoint (it changes only the
# weights a run starts from); the launch checks them. A promptset, when given, adds what will not work on it.
_NOT_SUMMARISED = ("name", "promptset_version_id", "starting_checkpoint_id")


@functools.lru_cache(maxsize=4)
def _tokenizer_of(model_json: str):
    """The run's tokenizer, read once per model (SmolLM2's takes a second or two the first time)."""
    return load_tokenizer(ModelConfig.model_validate_json(model_json))


def promptset_warnings(config: RunConfig, version: PromptsetVersion) -> list[str]:
    """``launch_contract.promptset_warnings`` for a stored promptset version (each problem once, whatever its weight)."""
    problems = list({row["problem_id"]: Problem.from_dict(row) for row in version.trainer_rows()}.values())
    return launch_contract.promptset_warnings(config, problems, _tokenizer_of(config.model.model_dump_json()))


def requested_summary(data: dict[str, Any], viewer=None) -> dict[str, Any]:
    """The summary of a launch of ``data`` (the launch contract's fields) before it is made, with the resolved config
    it reads, and with a ``promptset_version_id`` the ``viewer`` may see, the warnings about that promptset;
    LaunchError, per field, for what the launch would refuse."""
    given = {key: value for key, value in data.items() if key not in _NOT_SUMMARISED}
    group = None
    if group_launch.is_group_launch(given):
        group = group_launch.parse_group({**given, "name": data.get("name") or "group",
                                          "promptset_version_id": 1})
    # The form always sends its seeds (1 for a single run): the single run's contract has no such field.
    given = {key: value for key, value in given.items() if key not in group_launch.GROUP_FIELDS}
    request = launch_contract.parse({**given, "name": "summary", "promptset_version_id": 1})
    config = actions.schema_config(request.preset, actions.requested_overrides(request))
    version, problem_count, warnings = None, None, []
    if data.get("promptset_version_id") not in (None, "") and viewer is not None:
        version = actions.visible_promptset_version(viewer, data["promptset_version_id"])
        problem_count = actions.trainer_row_count(version)
    refused = launch_contract.schedule_problems(request, config, problem_count)
    if refused:
        raise launch_contract.LaunchError("the run's schedule cannot work as asked", refused)
    warnings += launch_contract.schedule_warnings(request, config, problem_count)
    if version is not None:
        warnings += promptset_warnings(config, version)
    return {"preset": request.preset, "config": config.to_public_dict(), "summary": summary(config, request.kind),
            "warnings": warnings, "runs": group_plan(group) if group else None}


def group_plan(group: group_launch.GroupRequest) -> dict[str, Any]:
    """What a group launch will start, said before it is made: how many runs, and each one's cell and seed."""
    cells, seeds = len(group.cells), group.seeds
    shape = f"{cells} cell{'s' if cells != 1 else ''} × {seeds} seed{'s' if seeds != 1 else ''}"
    return {"count": len(group.members),
            "text": f"This launch starts {len(group.members)} runs ({shape}), one group; each waits in the queue "
                    "within your quota as any run does.",
            "members": [member.request.name for member in group.members]}
