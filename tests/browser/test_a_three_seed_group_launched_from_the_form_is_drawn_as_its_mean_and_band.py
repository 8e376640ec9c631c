"""A three-seed cpu-smoke group launched from the form in Chromium: the form says the three runs it will start, the
three runs start and finish on the test's Ray head, the group page shows them, and the compare page draws the
group's mean and band; each plotted value equals the mean and extremes of the runs' metrics read through the API.
The group page and the compare page never scroll sideways at 1,400 px or at 390 px."""

import re
from statistics import fmean

import pytest

from runs.models import Quota, RunGroup, RunState
from tests.browser.conftest import fill_launch_fields, log_in, screenshot
from tests.browser.trainer_events import wait_until
from trainer.config import RunConfig

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

METRIC = "reward/mean"


def sideways_overflow(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_three_seeds_launched_from_the_form_are_drawn_as_the_mean_and_extremes_of_their_metrics(
        page, browser, alice, promptset_version, platform_processes, platform_logs):
    Quota.objects.create(user=alice, max_concurrent_runs=3, max_gpus=0)
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    page.fill("#id_name", "three seeds")
    page.select_option("#id_promptset_version", value=str(promptset_version.pk))
    page.select_option("#id_preset", "cpu-smoke")
    fill_launch_fields(page, {"total_steps": 2, "eval_every": 0, "seeds": 3})
    first_seed = RunConfig.from_preset("cpu-smoke").schedule.seed
    # Before launching, the form says what the launch will start.
    page.wait_for_selector("#launch-group-plan:not([hidden])")
    assert page.locator("#launch-group-count").inner_text().startswith("This launch starts 3 runs (1 cell × 3 seeds)")
    assert page.locator("#launch-group-runs li").all_inner_texts() == [
        f"three seeds · seed {seed}" for seed in range(first_seed, first_seed + 3)]
    page.click("#launch-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/groups/\d+/$"))

    group = RunGroup.objects.get(name="three seeds")
    runs = list(group.runs.order_by("pk"))
    assert len(runs) == 3
    assert page.locator(".group-runs tbody tr").count() == 3

    def all_ended():
        for run in runs:
            run.refresh_from_db()
        return all(run.is_final for run in runs)

    try:
        wait_until(all_ended, timeout_s=600, what="the three runs to end")
    except AssertionError:
        raise AssertionError(f"runs: {[(run.state, run.failure_reason) for run in runs]}\n{platform_logs()}") from None
    assert [run.state for run in runs] == [RunState.SUCCEEDED] * 3, [run.failure_reason for run in runs]

    page.reload()
    assert page.locator(".group-runs .state").all_inner_texts() == ["Succeeded"] * 3

    page.click("#compare-group")
    page.wait_for_function("document.getElementById('compare-chart')?.compareChart")
    drawn = page.evaluate("""() => {
        const {plot, series} = document.getElementById('compare-chart').compareChart;
        return {series, data: plot.data};
    }""")
    # What the API says each run measured, step by step.
    by_step = {}
    for run in runs:
        for record in page.request.get(f"/api/runs/{run.pk}/series").json()["metrics"]:
            if isinstance(record["values"].get(METRIC), int | float):
                by_step.setdefault(record["step"], []).append(record["values"][METRIC])
    assert by_step, "the runs measured no reward"
    mean = drawn["series"].index("three seeds (mean of 3 seeds)")
    high, low = drawn["series"].index("three seeds (band high)"), drawn["series"].index("three seeds (band low)")
    steps = drawn["data"][0]
    assert steps == sorted(by_step)
    for index, step in enumerate(steps):
        values = by_step[step]
        assert drawn["data"][mean][index] == pytest.approx(fmean(values))
        assert drawn["data"][low][index] == pytest.approx(min(values))
        assert drawn["data"][high][index] == pytest.approx(max(values))
    # The seeds themselves, on demand (the page's own checkbox was ticked by the group page's link).
    assert sum(label.startswith("three seeds · seed") for label in drawn["series"]) == 3
    assert sideways_overflow(page) <= 0
    screenshot(page, "three-seed-group-compare")
    compare_address = page.url

    phone = browser.new_context(base_url=platform_processes["url"], viewport={"width": 390, "height": 900}).new_page()
    log_in(phone, "alice", "alice-password")
    for address in (f"/runs/groups/{group.pk}/", compare_address):
        phone.goto(address)
        phone.wait_for_load_state("networkidle")
        assert sideways_overflow(phone) <= 0, f"{address} scrolls sideways at 390 px"
    phone.context.close()
