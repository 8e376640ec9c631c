"""The launch page calls the cpu-demo's warm start ready only once its builder has compiled vLLM for it (the mark
deploy/warm_start.py writes beside the model): before, it said "ready" as soon as the model folder existed, and a
cpu-demo launched then waited 102 s in Starting while vLLM compiled (issue 45). Until the mark, the page says vLLM is
being compiled and what that means for a run launched now."""

import json
import os

import pytest
from django.urls import reverse

from runs import warm_start
from runs.models import Run
from trainer.sft.warm_start_status import compile_caches

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("dispatched")]


@pytest.fixture
def built_model(settings, tmp_path):
    """The warm start's model folder as the builder leaves it once the fine-tuning is exported."""
    settings.WARM_START_MODEL = str(tmp_path / "model")
    settings.WARM_START_STATUS = str(tmp_path / "status.json")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    (tmp_path / "status.json").write_text(json.dumps({"state": "ready", "message": "ready"}))
    return tmp_path


def mark_vllm_compiled(folder, caches):
    (folder / "vllm-compile-cache.json").write_text(json.dumps({"caches": caches, "compiled": True, "seconds": 118.0}))


def warm_start_line(client) -> str:
    page = client.get(reverse("runs:new")).content.decode()
    return page.split('id="warm-start-status">', 1)[1].split("</p>", 1)[0]


def test_a_built_model_whose_vllm_is_still_compiling_is_not_called_ready(alices_client, built_model):
    assert warm_start.status()["state"] == "compiling"
    line = warm_start_line(alices_client)
    assert "ready" not in line
    assert "compiling vLLM for the warm start" in line and "waits that long in Starting" in line


def test_it_is_ready_once_the_builder_marks_vllm_compiled_for_these_caches(alices_client, built_model):
    mark_vllm_compiled(built_model, compile_caches(os.environ))
    assert warm_start.status()["state"] == "ready"
    assert warm_start_line(alices_client).strip().endswith("ready.")


def test_a_mark_for_other_compile_caches_is_still_compiling(built_model):
    mark_vllm_compiled(built_model, {**compile_caches(os.environ), "VLLM_CACHE_ROOT": "/elsewhere"})
    assert warm_start.status()["state"] == "compiling"


def test_a_cpu_demo_launched_while_vllm_compiles_starts_from_the_warm_start(alices_client, promptset_version,
                                                                          built_model):
    response = alices_client.post(reverse("runs:new"), {"name": "demo", "promptset_version": promptset_version.pk,
                                                        "preset": "cpu-demo", "kind": "rl"})
    assert response.status_code == 302
    assert Run.objects.get().config["model"]["init_checkpoint"] == str(built_model / "model")
