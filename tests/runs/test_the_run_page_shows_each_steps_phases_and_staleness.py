"""The run page gives a person each step's phases and staleness as the trainer measured them (issue 25), and
only that: a step whose metrics carry no ``time/phases`` (an older run, or a phase that did not happen) reaches
the page without them, never as zeros. The metrics come in through the real stream and ingester; the drawing
itself is checked in Chromium (tests/browser/test_the_run_page_draws_each_steps_phases_as_they_arrive.py)."""

import json
import re
from html import unescape

import pytest

from runs.ingest import EventIngester
from runs.step_phases import STEP_PHASES
from tests.runs.event_helpers import publisher_for
from trainer.config import RunConfig
from trainer.observability.events import EventType

pytestmark = pytest.mark.django_db(transaction=True)

PHASES = {"generation": [0.5, 12.0], "lean": [3.0, 19.5], "learning": [19.5, 25.0], "sync": [25.0, 25.75]}
ASYNC_STEP = {"rollout/staleness_mean": 0.5, "rollout/staleness_max": 1, "rollout/dropped_stale": 2,
              "time/generation_idle_s": 0.0, "time/learner_idle_s": 4.25, "time/phases": PHASES}


def json_script(page: str, element_id: str):
    found = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page, re.S)
    return json.loads(unescape(found.group(1)))


def page_of(client, alice, run) -> str:
    client.force_login(alice)
    response = client.get(run.get_absolute_url())
    assert response.status_code == 200
    return response.content.decode()


def test_a_step_without_phase_times_reaches_the_page_without_them_never_as_zeros(client, alice, running_run, redis_client):
    publisher = publisher_for(running_run)
    publisher.publish(EventType.RUN_STARTED, {"step": 0, "total_steps": 3})
    publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.25}})  # as a run before issue 25
    publisher.publish(EventType.METRICS, {"step": 2, "values": {"reward/mean": 0.5, **ASYNC_STEP}})
    EventIngester().poll_once()

    metrics = {row["step"]: row for row in json_script(page_of(client, alice, running_run), "run-series")["metrics"]}
    assert metrics[1] == {"step": 1, "attempt": 1, "values": {"reward/mean": 0.25}}
    assert metrics[2]["attempt"] == 1  # the clock its phases are on
    assert metrics[2]["values"]["time/phases"] == PHASES
    assert metrics[2]["values"]["time/learner_idle_s"] == 4.25


def test_the_page_names_each_phase_in_its_legend_in_the_order_of_the_lanes(client, alice, make_run):
    page = page_of(client, alice, make_run(state="running"))
    context = json_script(page, "run-context")
    assert [phase["name"] for phase in context["phases"]] == ["generation", "lean", "learning", "sync"]
    legend = re.search(r'<ul class="phase-legend" id="phase-legend">(.*?)</ul>', page, re.S).group(1)
    for phase in STEP_PHASES:
        assert f'<span class="phase-swatch phase-{phase.name}" aria-hidden="true"></span><strong>{phase.label}</strong>' in legend
    assert "<strong>not recorded</strong>" in legend and "never drawn as 0" in legend
    assert "in seconds since the attempt started" in page  # the axis's unit


def test_the_staleness_and_idle_metrics_have_words_a_person_understands(client, alice, make_run):
    page = page_of(client, alice, make_run(state="running"))
    labels = json_script(page, "run-context")["metricLabels"]
    assert labels["rollout/staleness_mean"] == "staleness, mean (updates behind)"
    assert labels["rollout/staleness_max"] == "staleness, max (updates behind)"
    assert labels["rollout/dropped_stale"] == "rollouts dropped as too stale (older than η updates)"
    assert labels["time/generation_idle_s"] == "generation idle (s)"
    assert labels["time/learner_idle_s"] == "learner waiting for its batch (s)"
    for chart in ("staleness", "dropped_stale", "idle"):
        assert f'data-chart="{chart}"' in page


def test_a_synchronous_run_says_eta_is_zero(client, alice, make_run):
    page = page_of(client, alice, make_run(state="running"))
    shown = unescape(re.search(r'<span id="staleness-bound" data-eta="0">(.*?)</span>', page).group(1))
    assert shown.startswith("synchronous (η = 0)")


def test_an_asynchronous_run_says_how_many_updates_stale_a_batch_may_be(client, alice, make_run):
    config = RunConfig.from_preset("cpu-demo").to_json_dict()
    config["rollout"]["max_staleness"] = 2
    page = page_of(client, alice, make_run(state="running", config=config))
    shown = unescape(re.search(r'<span id="staleness-bound" data-eta="2">(.*?)</span>', page).group(1))
    assert shown.startswith("asynchronous, at most η = 2 updates stale")
    assert "more than 2 updates old is dropped" in shown


def test_an_sft_run_has_no_phase_timeline_or_staleness(client, alice, make_run):
    page = page_of(client, alice, make_run(state="running", kind="sft"))
    assert 'id="phase-timeline"' not in page and 'id="staleness-bound"' not in page
