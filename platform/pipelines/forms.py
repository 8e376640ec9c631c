from __future__ import annotations

import json

from django import forms

from pipelines.actions import PipelineRequest
from pipelines.models import SftStart
from promptsets.models import Promptset, PromptsetVersion
from runs.models import Checkpoint, Run
from trainer.config import PRESETS


def _described(name: str) -> str:
    return PipelineRequest.model_fields[name].description or ""


class PipelineForm(forms.Form):
    """The pipeline's request (pipelines/actions.py) as an HTML form: the same fields, checked by the same parse."""

    name = forms.CharField(max_length=150)
    preset = forms.ChoiceField(choices=[(name, name) for name in PRESETS], initial="cpu-smoke",
                               help_text="Every stage's run uses it; its bounds apply to the stage settings.")
    model = forms.CharField(required=False, help_text=_described("model"))
    starting_checkpoint = forms.ModelChoiceField(queryset=Checkpoint.objects.none(), required=False,
                                                 help_text=_described("starting_checkpoint_id"))
    training_version = forms.ModelChoiceField(queryset=PromptsetVersion.objects.none(),
                                              help_text=_described("training_version_id"))
    benchmark_version = forms.ModelChoiceField(queryset=PromptsetVersion.objects.none(),
                                               help_text=_described("benchmark_version_id"))
    harvest_samples = forms.IntegerField(min_value=1, max_value=1024, initial=4, help_text=_described("harvest_samples"))
    harvest_error_correction = forms.BooleanField(required=False, help_text=_described("harvest_error_correction"))
    benchmark_samples = forms.IntegerField(min_value=1, max_value=1024, initial=4,
                                           help_text=_described("benchmark_samples"))
    sft_fields = forms.CharField(required=False, initial="{}", widget=forms.Textarea(attrs={"rows": 2}),
                                 help_text=_described("sft_fields") + " As JSON, e.g. {\"total_steps\": 2}.")
    rl_fields = forms.CharField(required=False, initial="{}", widget=forms.Textarea(attrs={"rows": 2}),
                                help_text=_described("rl_fields") + " As JSON, e.g. {\"total_steps\": 2}.")
    sft_start = forms.ChoiceField(choices=SftStart.choices, initial=SftStart.LAST)
    rl_max_win_rate = forms.FloatField(min_value=0, max_value=1, initial=0.5, help_text=_described("rl_max_win_rate"))
    max_iterations = forms.IntegerField(min_value=1, max_value=50, initial=3)
    min_gain = forms.IntegerField(min_value=0, initial=1, label="δ (minimum gain)", help_text=_described("min_gain"))

    def __init__(self, *args, user, **kwargs):
        super().__init__(*args, **kwargs)
        versions = PromptsetVersion.objects.filter(
            promptset__in=Promptset.objects.visible_to(user)).select_related("promptset")
        self.fields["training_version"].queryset = versions
        self.fields["benchmark_version"].queryset = versions
        self.fields["starting_checkpoint"].queryset = Checkpoint.objects.filter(
            run__in=Run.objects.visible_to(user), removed_at__isnull=True).select_related("run")

    def _json_object(self, field: str) -> dict:
        text = (self.cleaned_data.get(field) or "").strip() or "{}"
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            raise forms.ValidationError(f"not JSON ({error.msg} at character {error.pos}); write e.g. "
                                        '{"total_steps": 2}') from None
        if not isinstance(value, dict):
            raise forms.ValidationError(f"a JSON object of launch fields, e.g. {{\"total_steps\": 2}}; got {text!r}")
        return value

    def clean_sft_fields(self):
        return self._json_object("sft_fields")

    def clean_rl_fields(self):
        return self._json_object("rl_fields")

    def request_data(self) -> dict:
        data = dict(self.cleaned_data)
        checkpoint, training, benchmark = (data.pop("starting_checkpoint"), data.pop("training_version"),
                                           data.pop("benchmark_version"))
        return {**data, "model": data["model"] or None, "starting_checkpoint_id": checkpoint.pk if checkpoint else None,
                "training_version_id": training.pk, "benchmark_version_id": benchmark.pk}
