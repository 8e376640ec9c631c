"""The launch page's words about each preset are generated from the preset (its model's registry entry, its sizes),
so a preset that changes changes its description: the page once went on calling cpu-smoke's model "a tiny random
model" after it had become the smoke model (issue 37)."""

import re

import pytest
from django.urls import reverse

from runs.models import RegisteredModel
from trainer.config import PRESETS, RunConfig, _deep_merge

pytestmark = pytest.mark.django_db


def descriptions(client) -> dict[str, str]:
    page = client.get(reverse("runs:new")).content.decode()
    found = dict(re.findall(r'<li data-preset="([^"]+)">(.*?)</li>', page, flags=re.S))
    assert set(found) == set(PRESETS), f"the page describes {sorted(found)}, the presets are {sorted(PRESETS)}"
    return {name: re.sub(r"\s+", " ", text).replace("&#x27;", "'") for name, text in found.items()}


@pytest.mark.parametrize("preset", list(PRESETS))
def test_each_preset_is_described_by_its_registered_model_and_its_sizes(alices_client, preset):
    config = RunConfig.from_preset(preset)
    entry = RegisteredModel.objects.get(source=config.model.source.value, name_or_path=config.model.name_or_path)
    words = descriptions(alices_client)[preset]
    assert entry.name in words and entry.description.rstrip(".") in words, words
    rollout = config.rollout
    assert f"{rollout.prompts_per_step:,} prompt" in words and f"{rollout.samples_per_prompt:,} answer" in words
    assert f"up to {rollout.max_response_tokens:,} tokens" in words
    if config.schedule.total_steps is not None:
        assert f"{config.schedule.total_steps:,} step" in words
    if config.schedule.total_epochs is not None:
        assert f"{config.schedule.total_epochs:,} passes over the promptset" in words
    assert ("on CPU" in words) == (config.cluster.num_gpus == 0)
    if config.cluster.num_gpus:
        assert f"on {config.cluster.num_gpus} GPUs of {config.cluster.gpu_memory_gib:g} GiB" in words


def test_cpu_smoke_is_the_smoke_model_that_reaches_lean_only_on_the_smoke_promptset(alices_client):
    words = descriptions(alices_client)["cpu-smoke"]
    assert "tiny-smoke-llama" in words
    assert "four problems of the smoke promptset" in words and "reaches Lean only on that promptset" in words
    assert "random" not in words and "learns nothing useful" not in words, words


def test_a_changed_preset_is_described_as_it_now_is(alices_client, monkeypatch):
    monkeypatch.setitem(PRESETS, "cpu-smoke", _deep_merge(PRESETS["cpu-smoke"], {
        "rollout": {"prompts_per_step": 4, "max_response_tokens": 48}, "schedule": {"total_steps": 3}}))
    words = descriptions(alices_client)["cpu-smoke"]
    assert "4 prompts × 2 answers a step" in words and "up to 48 tokens" in words and "3 steps" in words, words


def test_a_reworded_registry_entry_rewords_the_preset(alices_client):
    RegisteredModel.objects.filter(name="SmolLM2-135M-Instruct").update(description="A 135M model on your CPU.")
    assert "SmolLM2-135M-Instruct (A 135M model on your CPU)" in descriptions(alices_client)["cpu-demo"]
