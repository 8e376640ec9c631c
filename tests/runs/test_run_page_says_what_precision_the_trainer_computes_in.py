"""The run page says what precision the trainer computes in and why, in the trainer's own words from its
run_started event: model.dtype=auto is resolved on the machine that trains (trainer/compute_dtype.py),
never in the web process, whose CPU says nothing about the Ray worker's."""

import re

import pytest
from django.utils import timezone

from runs.models import RunEvent
from trainer.compute_dtype import CpuReport, cpu_bfloat16_verdict
from trainer.observability.events import EventType

pytestmark = pytest.mark.django_db

AVX2_ONLY = CpuReport(capability="AVX2", has_avx512_bf16=False, has_amx_tile=False, onednn_cap=None)


def started(run, compute_dtype: dict, attempt: int = 1, number: int = 1) -> None:
    RunEvent.objects.create(run=run, event_id=f"started-{run.pk}-{number}", attempt=attempt, seq=0, run_seq=number,
                            type=EventType.RUN_STARTED, published_at=timezone.now(),
                            payload={"step": 0, "total_steps": 20, "compute_dtype": compute_dtype})


def precision_shown(page: str) -> str:
    return re.search(r'<span id="compute-precision-sentence">(.*?)</span>', page).group(1)


def float32_on_avx2() -> dict:
    _, reason = cpu_bfloat16_verdict(AVX2_ONLY)
    return {"requested": "auto", "dtype": "float32", "reason": reason, "warning": None,
            "sentence": f"computes in float32: {reason}"}


def test_before_the_trainer_starts_the_page_says_the_trainer_will_choose(client, alice, make_run):
    run = make_run(state="queued")
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Precision (<code>model.dtype</code> auto)" in page
    assert precision_shown(page) == "chosen by the trainer on its machine when it starts"
    assert "instructions" not in page  # nothing about the web server's own CPU


def test_once_started_the_page_shows_the_trainers_choice_and_its_reason(client, alice, make_run):
    run = make_run(state="running")
    started(run, float32_on_avx2())
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert (precision_shown(page)
            == "the trainer computes in float32: this CPU has no bfloat16 instructions (torch reports AVX2)")


def test_a_resumed_attempt_on_another_machine_shows_its_own_choice(client, alice, make_run):
    run = make_run(state="running")
    started(run, float32_on_avx2())
    started(run, {"requested": "auto", "dtype": "bfloat16", "reason": "this CPU has AMX tiles", "warning": None,
                  "sentence": "computes in bfloat16: this CPU has AMX tiles"}, attempt=2, number=2)
    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    # The paragraph shows the latest attempt's; the log keeps the first attempt's start as it was.
    assert precision_shown(page) == "the trainer computes in bfloat16: this CPU has AMX tiles"
