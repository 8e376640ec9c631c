"""The form and the API refuse a run the memory plan says will not fit, naming the part over and by how much.

The plans here are real (trainer/memory/memory_plan.py on fake tensors), of the tiny random model on
GPUs made small enough for it not to fit: planned in seconds, refused for the same reasons an
h100x8 run with too little memory would be.
"""

import pytest
from django.urls import reverse

from runs.forms import LaunchRunForm
from runs.models import Run
from tests.memory.tiny_gpu import tiny_gpu_sections
from trainer.config import PRESETS

pytestmark = pytest.mark.django_db


@pytest.fixture
def register_preset(monkeypatch):
    """A preset of GPUs the tiny model does (or does not) fit: people launch presets, never GPU settings
    (runs/launch_contract.py), so a configuration that will not fit comes from a preset."""
    from runs import launch_contract

    def register(name: str, values: dict) -> str:
        monkeypatch.setitem(PRESETS, name, values)
        monkeypatch.setitem(launch_contract.PRESET_BOUNDS, name, launch_contract.PRESET_BOUNDS["h100x8"])
        monkeypatch.setattr(LaunchRunForm.base_fields["preset"], "choices", [(preset, preset) for preset in PRESETS])
        return name

    return register


def api_launch(client, version, preset):
    return client.post("/api/runs/", {"name": "big run", "promptset_version_id": version.pk, "preset": preset},
                       content_type="application/json")


def test_the_api_refuses_a_vllm_share_that_leaves_the_learner_no_room(alices_client, promptset_version, dispatched,
                                                                      register_preset):
    preset = register_preset("tiny-vllm-hog", tiny_gpu_sections(rollout={"vllm_gpu_memory_utilization": 0.95}))
    response = api_launch(alices_client, promptset_version, preset)
    assert response.status_code == 422
    body = response.json()
    assert "would not fit in its GPUs' memory" in body["detail"]
    [message] = body["field_errors"]["rollout.vllm_gpu_memory_utilization"]
    assert message.startswith("rollout: ") and "over the 36.0 GiB a rank may use (40 GiB GPU, 10% kept spare) by" in message
    assert Run.objects.count() == 0 and dispatched == []


def test_the_api_launches_the_same_run_when_it_fits(alices_client, promptset_version, dispatched, register_preset):
    response = api_launch(alices_client, promptset_version, register_preset("tiny-fits", tiny_gpu_sections()))
    assert response.status_code == 201, response.json()
    assert Run.objects.get().config["cluster"]["gpu_memory_gib"] == 40.0


def test_the_form_shows_which_part_is_over_by_how_much_on_the_field(alices_client, promptset_version, dispatched,
                                                                   register_preset):
    # A preset whose GPUs are too small for the learner.
    register_preset("tiny-on-2gib", tiny_gpu_sections(cluster={"gpu_memory_gib": 2.0},
                                           rollout={"vllm_gpu_memory_utilization": 0.05}))
    response = alices_client.post(reverse("runs:new"), {"name": "too big", "promptset_version": promptset_version.pk,
                                                        "preset": "tiny-on-2gib", "kind": "rl"})
    assert response.status_code == 200
    errors = response.context["form"].errors

    [learner_message] = errors["max_response_tokens"]
    assert learner_message.startswith("learner step: ") and "over the 1.8 GiB a rank may use" in learner_message
    assert "by " in learner_message and "GiB; lower optimizer.micro_batch_tokens" in learner_message
    assert Run.objects.count() == 0 and dispatched == []
