"""A person warm-starts a model with an SFT run and starts an RL run from its checkpoint, through
the forms and the real stack (Celery, Ray, the stand-in, the ingester); each run page's step count,
charts and lineage agree with the API."""

import re

import pytest

from runs.models import Checkpoint, Run, RunState
from tests.browser.conftest import log_in, screenshot
from tests.browser.trainer_events import wait_for_state

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def launch(page, name, kind, checkpoint_label=None):
    page.goto("/runs/new/")
    page.fill("#id_name", name)
    page.select_option("#id_promptset_version", label="arith v1")
    page.select_option("#id_kind", kind)
    page.select_option("#id_preset", "cpu-smoke")
    if checkpoint_label:
        page.select_option("#id_starting_checkpoint", label=checkpoint_label)
    page.click("#launch-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return Run.objects.get(name=name)


def api(page, path):
    response = page.request.get(path)
    assert response.ok, f"{path}: HTTP {response.status}"
    return response.json()


def chart(page, name):
    return page.evaluate(f"document.querySelector('[data-chart={name}]').stepChart.plot.data")


def finish(run, platform_logs):
    try:
        return wait_for_state(run, RunState.SUCCEEDED, timeout_s=300)
    except AssertionError:
        raise AssertionError(f"run {run.name!r} is {run.state}: {run.failure_reason}\n{platform_logs()}") from None


def test_an_sft_run_and_an_rl_run_from_its_checkpoint_show_the_steps_series_and_lineage_the_api_gives(
        page, alice, promptset_version, platform_logs):
    log_in(page, "alice", "alice-password")
    sft = finish(launch(page, "warm start", "sft"), platform_logs)
    page.goto(f"/runs/{sft.pk}/")
    stored = api(page, f"/api/runs/{sft.pk}")
    series = api(page, f"/api/runs/{sft.pk}/series")["metrics"]
    steps = [row["step"] for row in series]
    assert stored["kind"] == "sft" and steps == list(range(1, len(steps) + 1)) and len(steps) >= 2
    assert stored["current_step"] == steps[-1], f"the API's current_step {stored['current_step']} vs its series {steps}"
    facts = page.locator(".run-facts").inner_text()
    assert f"step {steps[-1]} of {steps[-1]}" in facts, f"the SFT page says {facts!r}; its series has {len(steps)} steps"
    for name, key in (("sft_loss", "sft_loss"), ("learning_rate", "learning_rate"), ("grad_norm", "grad_norm")):
        data = chart(page, name)
        assert data[0] == steps, f"the {name} chart's steps"
        assert data[1] == pytest.approx([row["values"][key] for row in series]), f"the {name} chart against the API"
    assert page.locator("#rollout-filters").count() == 0
    last = Checkpoint.objects.filter(run=sft).order_by("-step").first()
    assert last is not None and last.step == steps[-1], "the SFT run's last step is its checkpoint"
    screenshot(page, "walk-sft")

    rl = finish(launch(page, "from the warm start", "rl", checkpoint_label=str(last)), platform_logs)
    page.goto(f"/runs/{rl.pk}/")
    stored = api(page, f"/api/runs/{rl.pk}")
    series = api(page, f"/api/runs/{rl.pk}/series")["metrics"]
    steps = [row["step"] for row in series]
    total = stored["config"]["schedule"]["total_steps"]
    assert stored["starting_checkpoint_id"] == last.pk
    assert stored["config"]["model"]["init_checkpoint"] == last.model_folder
    lineage = page.locator("#lineage")
    assert lineage.get_attribute("href") == f"/runs/{sft.pk}/" and lineage.get_attribute("data-checkpoint-id") == str(last.pk)
    assert lineage.inner_text() == f"warm start · step {last.step}"
    facts = page.locator(".run-facts").inner_text()
    assert stored["current_step"] == steps[-1] == total and f"step {total} of {total}" in facts, facts
    reward = chart(page, "reward")
    assert reward[0] == steps
    assert reward[1] == pytest.approx([row["values"]["reward/mean"] for row in series], nan_ok=True)
    assert page.locator("#rollouts li.rollout").count() > 0, "the RL run's rollouts are listed"
    screenshot(page, "walk-rl")
