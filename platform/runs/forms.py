from __future__ import annotations

from django import forms
from django.core.exceptions import ImproperlyConfigured

from promptsets.models import Promptset, PromptsetVersion
from runs import group_launch, launch_contract, launch_plan
from runs.launch_contract import SETTABLE_FIELDS, LaunchError
from runs.models import MOST_INFRASTRUCTURE_RETRIES, Checkpoint, RegisteredModel, Run, RunKind
from trainer.config import PRESETS, PromptSelection, RetryHistory, RolloutEngineKind, RunConfig

# POST keys that are not launch fields but belong to every Django form.
_FORM_MACHINERY = {"csrfmiddlewaretoken"}

DEFAULT_PRESET = "cpu-demo"

# The form in the order people decide: what every run names first (open), then what few change (collapsed).
FIELD_GROUPS = (
    ("What every run sets", ("name", "promptset_version", "kind", "preset", "model", "starting_checkpoint")),
    ("Schedule", ("total_steps", "total_epochs", "learning_rate", "eval_every", "checkpoint_every", "seed")),
    ("Sampling", ("prompts_per_step", "samples_per_prompt", "max_response_tokens", "temperature", "rollout_engine")),
    ("Asynchronous RL and evaluation", ("max_staleness", "rollout_gpus", "eval_samples", "error_correction")),
    ("Beyond the release", ("max_rounds", "retry_history", "lean_tool_calls", "data_selection")),
    ("When the infrastructure fails", ("infrastructure_retries",)),
    ("Seeds and a grid", ("seeds", "grid")),
)


class LaunchRunForm(forms.Form):
    """The launch contract (runs/launch_contract.py) as an HTML form: the same fields, the same checks."""

    name = forms.CharField(max_length=launch_contract.NAME_MAX_CHARS)
    promptset_version = forms.ModelChoiceField(queryset=PromptsetVersion.objects.none(), label="Promptset version")
    kind = forms.ChoiceField(choices=RunKind.choices, initial=RunKind.RL, label="Kind of run",
                             help_text="Warm-start SFT teaches the answer format from demonstrations generated "
                                       "for the promptset; start an RL run from its checkpoint.")
    preset = forms.ChoiceField(choices=[(name, name) for name in PRESETS], initial=DEFAULT_PRESET)
    model = forms.ChoiceField(required=False, label="Model",
                              help_text="Models come from the registry an administrator keeps.")
    starting_checkpoint = forms.ModelChoiceField(
        queryset=Checkpoint.objects.none(), required=False, label="Start from checkpoint",
        help_text="Blank: the preset's model. A checkpoint of an earlier run (e.g. warm-start SFT) to start from.",
    )

    error_correction = forms.NullBooleanField(
        required=False, label="Error correction (evaluations)",
        widget=forms.Select(choices=[("", "the preset's"),
                                     ("true", "on: retries of failed attempts, up to the rounds of correction"),
                                     ("false", "off: first attempts only")]),
        help_text="An evaluation's pass@k after a retry of each failed attempt, up to the rounds of correction (one "
                  "round: the release's 'with error fixing'), or without.")

    rollout_engine = forms.ChoiceField(
        required=False, label="Rollout engine",
        choices=[("", "the preset's"),
                 (RolloutEngineKind.VLLM.value, "vLLM (on a CPU node, its CPU build)"),
                 (RolloutEngineKind.TRANSFORMERS.value, "transformers")],
        help_text="What samples the rollouts. The preset's may name a fallback for a node that cannot run its "
                  "engine (cpu-demo: transformers where vLLM's CPU build is missing), and the run's page says when it "
                  "was used; an engine chosen here never falls back: the run fails at start-up, saying why.")

    retry_history = forms.ChoiceField(
        required=False, label="What a round's prompt carries",
        choices=[("", "the preset's"),
                 (RetryHistory.LAST.value, "last: the last attempt and its errors (the release's retry)"),
                 (RetryHistory.ALL.value, "all: every earlier attempt and its errors, the oldest dropped to fit")],
        help_text="With two or more rounds of correction: what each round's prompt quotes of the rounds before it.")

    data_selection = forms.ChoiceField(
        required=False, label="Prompt selection",
        choices=[("", "the preset's"),
                 (PromptSelection.UNIFORM.value, "uniform: every problem in turn (the release's)"),
                 (PromptSelection.HISTORY.value, "history: skip problems whose recent groups taught nothing")],
        help_text="history: a problem whose recent groups all failed or all passed (no signal for the learner) is "
                  "skipped before generation, more often the longer that lasts but never always, starting from the "
                  "promptset's history of earlier runs; its slot goes to the next problem.")

    infrastructure_retries = forms.IntegerField(
        required=False, label="Automatic retries after an infrastructure failure",
        initial=launch_contract.LaunchRequest.model_fields["infrastructure_retries"].default,
        min_value=0, max_value=MOST_INFRASTRUCTURE_RETRIES,
        help_text=launch_contract.LaunchRequest.model_fields["infrastructure_retries"].description)

    seeds = forms.IntegerField(
        required=False, initial=1, min_value=1, max_value=group_launch.MAX_SEEDS, label="Seeds",
        help_text=group_launch.GROUP_FIELDS["seeds"])
    grid = forms.CharField(
        required=False, label="Grid", widget=forms.Textarea(attrs={"rows": 3, "placeholder": "learning_rate=1e-5, 2e-5"}),
        help_text="One launch field a line with the values it takes, e.g. learning_rate=1e-5, 2e-5. "
                  + group_launch.GROUP_FIELDS["grid"].split(": ", 1)[1])

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        # What a launch offers first is what to train on: a split's held-out eval parts come last.
        self.fields["promptset_version"].queryset = PromptsetVersion.objects.filter(
            promptset__in=Promptset.objects.visible_to(user)
        ).select_related("promptset").with_held_out().order_by("held_out", "promptset__name", "-number")
        self.fields["starting_checkpoint"].queryset = Checkpoint.objects.filter(
            run__in=Run.objects.visible_to(user)
        ).select_related("run").order_by("-created_at")
        self.fields["model"].choices = [("", "the preset's model")] + [
            (name, name) for name in RegisteredModel.objects.filter(is_enabled=True).values_list("name", flat=True)]
        # Each field shows the chosen preset's value and that preset's range alone; the page's script swaps them
        # when another preset is chosen, from the same launch_plan.field_values (json_script).
        self.chosen_preset = self._chosen_preset()
        config = RunConfig.from_preset(self.chosen_preset)
        shown = launch_plan.field_values(config)
        self.allowed = {}
        for name, settable in SETTABLE_FIELDS.items():
            field_class = forms.IntegerField if settable.kind is int else forms.FloatField
            values = shown[name]
            self.fields[name] = field_class(required=False, help_text=settable.meaning, initial=values["value"])
            self.fields[name].widget.attrs.update({"placeholder": values["placeholder"], "min": values["min"],
                                                   "max": values["max"], "step": "1" if settable.kind is int else "any"})
            self.allowed[name] = values["allowed"]
        for name, text in launch_plan.blank_choices(config).items():
            holder = self.fields[name] if hasattr(self.fields[name], "choices") else self.fields[name].widget
            holder.choices = [("", text), *list(holder.choices)[1:]]

    def _chosen_preset(self) -> str:
        preset = self.data.get("preset") if self.is_bound else None
        return preset if preset in PRESETS else DEFAULT_PRESET

    def groups(self) -> list[dict]:
        """FIELD_GROUPS with their bound fields; a collapsed group opens when one of its fields has an error."""
        grouped = [name for _, names in FIELD_GROUPS for name in names]
        if sorted(grouped) != sorted(self.fields):  # a field in no group would vanish from the page
            raise ImproperlyConfigured(f"runs.forms.FIELD_GROUPS must hold each launch field once; it holds {grouped}, "
                                       f"the form has {list(self.fields)}")
        return [{"title": title, "is_first": number == 0,
                 "is_open": number == 0 or any(self[name].errors for name in names),
                 "fields": [(self[name], self.allowed.get(name, "")) for name in names]}
                for number, (title, names) in enumerate(FIELD_GROUPS)]

    def launch_data(self) -> dict:
        """The contract's fields from the cleaned form (blank settable fields left out: the preset's value)."""
        data = {
            "name": self.cleaned_data["name"], "promptset_version_id": self.cleaned_data["promptset_version"].pk,
            "preset": self.cleaned_data["preset"], "kind": self.cleaned_data["kind"],
            "model": self.cleaned_data.get("model") or None,
            "starting_checkpoint_id": getattr(self.cleaned_data.get("starting_checkpoint"), "pk", None),
        }
        data.update({name: self.cleaned_data[name] for name in SETTABLE_FIELDS
                     if self.cleaned_data.get(name) is not None})
        for choice in ("error_correction", "infrastructure_retries"):  # blank: the contract's default
            if self.cleaned_data.get(choice) is not None:
                data[choice] = self.cleaned_data[choice]
        for choice in ("rollout_engine", "retry_history", "data_selection"):  # blank: the preset's
            if self.cleaned_data.get(choice):
                data[choice] = self.cleaned_data[choice]
        if self.cleaned_data.get("seeds") not in (None, 1):
            data["seeds"] = self.cleaned_data["seeds"]
        if self.cleaned_data.get("grid", "").strip():
            data["grid"] = self.cleaned_data["grid"]
        return data

    def clean(self):
        cleaned = super().clean()
        unknown = sorted(set(self.data) - set(self.fields) - _FORM_MACHINERY) if self.is_bound else []
        for key in unknown:
            self.add_error(None, launch_contract.unknown_field_message(key))
        if self.errors:
            return cleaned
        data = self.launch_data()
        try:
            # A group request (seeds or a grid) goes to actions.launch_group, a single one to actions.launch_run.
            self.launch_request = (group_launch.parse_group(data) if group_launch.is_group_launch(data)
                                   else launch_contract.parse(data))
        except LaunchError as error:
            self.add_launch_error(error)
        return cleaned

    def add_launch_error(self, error: LaunchError) -> None:
        """Each complaint of the contract or the trainer's schema on the field it is about, or above the form."""
        for field, messages in error.field_errors.items():
            field = launch_contract.REFERENCE_FIELDS.get(field, field)
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
