from __future__ import annotations

from django import forms
from django.db.models import Case, Value, When

from promptsets.models import PromptsetVersion
from runs.actions import LaunchError, resolve_config
from runs.models import Checkpoint, Run, RunKind
from trainer.config import PRESETS

# Form field → (config section, field). Left blank, the preset's value stands.
OVERRIDE_FIELDS = {
    "total_steps": ("schedule", "total_steps"),
    "prompts_per_step": ("rollout", "prompts_per_step"),
    "samples_per_prompt": ("rollout", "samples_per_prompt"),
    "max_response_tokens": ("rollout", "max_response_tokens"),
    "learning_rate": ("optimizer", "learning_rate"),
}
FIELD_FOR_PATH = {".".join(path): name for name, path in OVERRIDE_FIELDS.items()}


class LaunchRunForm(forms.Form):
    name = forms.CharField(max_length=200)
    promptset_version = forms.ModelChoiceField(queryset=PromptsetVersion.objects.none(), label="Promptset version")
    kind = forms.ChoiceField(choices=RunKind.choices, initial=RunKind.RL, label="Kind of run",
                             help_text="Warm-start SFT teaches the answer format from demonstrations generated "
                                       "for the promptset; start an RL run from its checkpoint.")
    preset = forms.ChoiceField(choices=[(name, name) for name in PRESETS], initial="cpu-demo")
    starting_checkpoint = forms.ModelChoiceField(
        queryset=Checkpoint.objects.none(), required=False, label="Start from checkpoint",
        help_text="Blank: the preset's model. A checkpoint of an earlier run (e.g. warm-start SFT) to start from.",
    )
    total_steps = forms.IntegerField(required=False, min_value=1, help_text="Blank: the preset's value.")
    prompts_per_step = forms.IntegerField(required=False, min_value=1)
    samples_per_prompt = forms.IntegerField(required=False, min_value=1, help_text="The GRPO group size.")
    max_response_tokens = forms.IntegerField(required=False, min_value=1)
    learning_rate = forms.FloatField(required=False, min_value=0)

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        from promptsets.models import Promptset

        # What a launch offers first is what to train on: a split's held-out eval parts come last.
        self.fields["promptset_version"].queryset = PromptsetVersion.objects.filter(
            promptset__in=Promptset.objects.visible_to(user)
        ).select_related("promptset").annotate(
            held_out_last=Case(When(rule__kind="split", rule__part="eval", then=Value(1)), default=Value(0)),
        ).order_by("held_out_last", "promptset__name", "-number")
        self.fields["starting_checkpoint"].queryset = Checkpoint.objects.filter(
            run__in=Run.objects.visible_to(user)
        ).select_related("run").order_by("-created_at")

    def overrides(self) -> dict:
        result: dict = {}
        for name, (section, field) in OVERRIDE_FIELDS.items():
            value = self.cleaned_data.get(name)
            if value is not None:
                result.setdefault(section, {})[field] = value
        return result

    def clean(self):
        cleaned = super().clean()
        if self.errors or "preset" not in cleaned:
            return cleaned
        try:
            self.resolved_config = resolve_config(cleaned["preset"], self.overrides())
        except LaunchError as error:
            self.add_launch_error(error)
        return cleaned

    def add_launch_error(self, error: LaunchError) -> None:
        """Each of the trainer schema's complaints on the field it is about, or above the form."""
        for path, messages in error.field_errors.items():
            field = FIELD_FOR_PATH.get(path, "preset" if path == "preset" else None)
            for message in messages:
                self.add_error(field, f"{path}: {message}" if field is None else message)
