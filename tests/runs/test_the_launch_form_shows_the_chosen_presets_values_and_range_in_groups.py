"""The launch form shows, in every numeric field, the chosen preset's value and that preset's range alone, grouped:
what every run sets first and open, then the schedule, sampling, and asynchronous RL and evaluation, collapsed
until opened (issue 37: twenty blank fields in one column, with every preset's range at once)."""

import re

import pytest
from django.urls import reverse

from runs.launch_contract import SETTABLE_FIELDS, bounds, number_text
from runs.launch_plan import setting
from trainer.config import RunConfig

pytestmark = pytest.mark.django_db


def input_tag(page: str, field: str) -> str:
    return re.search(rf'<input [^>]*name="{field}"[^>]*>', page).group(0)


def attribute(tag: str, name: str) -> str | None:
    found = re.search(rf'\s{name}="([^"]*)"', tag)
    return found.group(1) if found else None


def allowed(page: str, field: str) -> str:
    return re.search(rf'data-allowed-for="{field}">([^<]*)<', page).group(1)


def test_each_field_holds_the_default_presets_value_and_only_its_range(alices_client):
    page = alices_client.get(reverse("runs:new")).content.decode()
    config = RunConfig.from_preset("cpu-demo")
    for field in SETTABLE_FIELDS:
        tag, value = input_tag(page, field), setting(config, field)
        assert attribute(tag, "value") == (None if value is None else number_text(value)), tag
        assert attribute(tag, "placeholder"), f"{field} has no placeholder: {tag}"
        bound = bounds("cpu-demo")[field]
        assert allowed(page, field) == f"Allowed for cpu-demo: {bound.describe()}."
        assert (attribute(tag, "min"), attribute(tag, "max")) == (number_text(bound.low), number_text(bound.high))
    assert "h100x8 1 to 5,000" not in page and "Allowed: cpu-smoke" not in page


def test_a_form_sent_back_shows_the_range_of_the_preset_it_was_sent_with(alices_client, promptset_version):
    page = alices_client.post(reverse("runs:new"), {"name": "big", "promptset_version": promptset_version.pk,
                                                    "preset": "h100x8", "kind": "rl", "prompts_per_step": "4"}
                              ).content.decode()
    assert "must be from 8 to 512 for the h100x8 preset (got 4)" in page
    assert allowed(page, "prompts_per_step") == "Allowed for h100x8: 8 to 512."
    assert attribute(input_tag(page, "prompts_per_step"), "value") == "4"  # what was sent, not the preset's


def test_a_blank_choice_names_what_the_preset_chooses(alices_client):
    page = alices_client.get(reverse("runs:new")).content.decode()
    assert ("<option value=\"\" selected>the preset&#x27;s (vllm, or transformers where it cannot run)</option>"
            in page)
    assert "<option value=\"\" selected>the preset&#x27;s (SmolLM2-135M-Instruct)</option>" in page


def groups(page: str) -> list[tuple[str, bool, list[str]]]:
    """(title, is it open, the fields inside) for each group, in page order."""
    found = []
    for match in re.finditer(r'<(fieldset|details) class="field-group"( open)?>\s*<(?:legend|summary)>([^<]+)<'
                             r'(.*?)</(?:fieldset|details)>', page, flags=re.S):
        kind, is_open, title, body = match.groups()
        found.append((title, kind == "fieldset" or bool(is_open), re.findall(r'<(?:input|select)[^>]* name="([^"]+)"', body)))
    return found


def test_the_fields_are_grouped_and_the_later_groups_start_collapsed(alices_client):
    page = alices_client.get(reverse("runs:new")).content.decode()
    assert groups(page) == [
        ("What every run sets", True, ["name", "promptset_version", "kind", "preset", "model", "starting_checkpoint"]),
        ("Schedule", False, ["total_steps", "total_epochs", "learning_rate", "eval_every", "checkpoint_every", "seed"]),
        ("Sampling", False, ["prompts_per_step", "samples_per_prompt", "max_response_tokens", "temperature",
                             "rollout_engine"]),
        ("Asynchronous RL and evaluation", False, ["max_staleness", "rollout_gpus", "eval_samples", "error_correction"]),
        ("Beyond the release", False, ["max_rounds", "retry_history", "lean_tool_calls", "data_selection"]),
        ("When the infrastructure fails", False, ["infrastructure_retries"]),
        ("Seeds and a grid", False, ["seeds"]),  # and the grid's box, a textarea
    ]


def test_a_collapsed_group_opens_when_one_of_its_fields_has_an_error(alices_client, promptset_version):
    page = alices_client.post(reverse("runs:new"), {"name": "x", "promptset_version": promptset_version.pk,
                                                    "preset": "cpu-demo", "kind": "rl", "eval_samples": "99"}
                              ).content.decode()
    assert [(title, is_open) for title, is_open, _ in groups(page)] == [
        ("What every run sets", True), ("Schedule", False), ("Sampling", False),
        ("Asynchronous RL and evaluation", True), ("Beyond the release", False),
        ("When the infrastructure fails", False), ("Seeds and a grid", False)]
