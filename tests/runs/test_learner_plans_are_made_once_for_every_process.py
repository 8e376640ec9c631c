"""A GPU run's learner memory plan (a fake-tensor run of the whole model: half a minute of CPU for the
h100x8 preset) is made once and kept in the database, so no web process makes it again and the deploy
can make the presets' plans before anyone launches (``manage.py plan_presets``)."""

import pytest
from django.core.management import CommandError, call_command

from runs.models import LearnerPlan
from tests.memory.tiny_gpu import tiny_gpu_config, tiny_gpu_sections
from trainer.config import PRESETS
from trainer.memory import memory_fit, memory_plan

pytestmark = pytest.mark.django_db


@pytest.fixture
def another_process(monkeypatch):
    """This process as a fresh one would be: nothing remembered in memory, and planning again would fail."""

    def start():
        memory_plan._cached_learner_plan.cache_clear()

        def plan_again(config, architecture=None):
            raise AssertionError("the learner was planned again although its plan is stored")

        monkeypatch.setattr(memory_plan, "plan_learner", plan_again)

    yield start
    memory_plan._cached_learner_plan.cache_clear()


def test_a_plan_is_made_once_and_read_back_by_any_other_process(another_process):
    config = tiny_gpu_config()
    made = LearnerPlan.objects.for_config(config)
    assert LearnerPlan.objects.count() == 1
    another_process()
    assert LearnerPlan.objects.for_config(config) == made
    assert memory_fit.check_fits_by_field(config, learner_plan=LearnerPlan.objects.for_config) == {}


def test_the_launch_check_stores_the_plan_it_made(alices_client, promptset_version, dispatched, monkeypatch,
                                                  another_process):
    from runs import launch_contract

    monkeypatch.setitem(PRESETS, "tiny-gpu", tiny_gpu_sections())
    monkeypatch.setitem(launch_contract.PRESET_BOUNDS, "tiny-gpu", launch_contract.PRESET_BOUNDS["h100x8"])
    launch = {"name": "first", "promptset_version_id": promptset_version.pk, "preset": "tiny-gpu"}
    assert alices_client.post("/api/runs/", launch, content_type="application/json").status_code == 201
    assert LearnerPlan.objects.count() == 1
    another_process()
    second = alices_client.post("/api/runs/", {**launch, "name": "second"}, content_type="application/json")
    assert second.status_code == 201, second.content


@pytest.mark.parametrize("other_code", ["plan version", "torch", "transformers"])
def test_a_plan_made_by_other_code_is_not_reused(monkeypatch, other_code):
    import torch
    import transformers

    config = tiny_gpu_config()
    LearnerPlan.objects.for_config(config)
    assert LearnerPlan.objects.of(config).exists()
    if other_code == "plan version":
        monkeypatch.setattr(memory_plan, "LEARNER_PLAN_VERSION", memory_plan.LEARNER_PLAN_VERSION + 1)
    else:
        monkeypatch.setattr({"torch": torch, "transformers": transformers}[other_code], "__version__", "9.9.9")
    assert not LearnerPlan.objects.of(config).exists()


def test_plan_presets_makes_each_gpu_presets_plan_once(monkeypatch, capsys):
    monkeypatch.setitem(PRESETS, "tiny-gpu", tiny_gpu_sections())
    call_command("plan_presets", "--preset", "tiny-gpu")
    first = capsys.readouterr().out
    assert first.startswith("tiny-gpu: learner peak ") and "planned in" in first
    call_command("plan_presets", "--preset", "tiny-gpu")
    assert "already planned" in capsys.readouterr().out
    assert LearnerPlan.objects.count() == 1


def test_plan_presets_refuses_a_cpu_preset():
    with pytest.raises(CommandError, match="cpu-demo runs on CPU: it has no GPU memory to plan"):
        call_command("plan_presets", "--preset", "cpu-demo")
