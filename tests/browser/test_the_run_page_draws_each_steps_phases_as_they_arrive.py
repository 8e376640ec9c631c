"""The run page draws each step's phases (generation, Lean, learning, weight sync) on one time axis as the metrics
arrive (issue 25), so a person sees what overlapped and what waited; a step without phase times says "not
recorded" and has no bar. The metrics travel the real path: the run's Redis Stream, the platform's ingester, the
WebSocket, with no trainer (tests/browser/trainer_events.py)."""

import time

import pytest

from runs.models import Run, RunState
from tests.browser.conftest import log_in, screenshot
from tests.browser.trainer_events import publish, wait_for_state, wait_until
from trainer.config import RunConfig
from trainer.observability.events import EventType, RolloutFinished

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# An asynchronous run (η = 1): step 3's batch is generated and checked while step 2 learns and syncs.
PHASES = {
    2: {"generation": [1.0, 9.0], "lean": [2.5, 14.0], "learning": [14.0, 20.0], "sync": [20.0, 21.5]},
    3: {"generation": [12.0, 19.0], "lean": [13.0, 22.0], "learning": [22.0, 27.0], "sync": [27.0, 28.0]},
    # A step whose sync did not happen: that lane stays empty, never a zero-length bar.
    4: {"generation": [21.5, 26.0], "lean": [22.0, 29.0], "learning": [29.0, 33.5]},
}


def staleness(step):
    return {"rollout/staleness_mean": 0.5, "rollout/staleness_max": 1, "rollout/dropped_stale": step - 2,
            "time/generation_idle_s": 0.0, "time/learner_idle_s": 1.25, "rollout/policy_version": step - 1}


def bars(page, step):
    return page.evaluate("""step => [...document.querySelectorAll(`#phase-timeline .phase-row[data-step="${step}"] .phase-bar`)]
        .map(bar => { const box = bar.getBoundingClientRect();
                      return {phase: bar.dataset.phase, start: +bar.dataset.start, end: +bar.dataset.end,
                              left: box.left, right: box.right, width: box.width}; })""", step)


def test_bars_appear_for_each_phase_as_metrics_arrive_and_a_step_without_times_says_not_recorded(page, alice, make_run):
    config = RunConfig.from_preset("cpu-demo").to_json_dict()
    config["rollout"]["max_staleness"] = 1
    run = make_run(state=RunState.STARTING, name="async run", config=config)
    started = time.time() - 60
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 4}, at=started)
    # Step 1 as a trainer from before issue 25 reports it: no phase times, no staleness.
    publish(run, EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.0, "time/generation_s": 8.0}}, at=started + 10)
    wait_for_state(run, RunState.RUNNING)

    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    assert "asynchronous, at most η = 1 update stale" in page.locator("#staleness-bound").inner_text()
    assert "Not recorded" in page.locator("#phase-timeline").inner_text()  # no step has phase times yet
    assert page.locator("#phase-timeline .phase-bar").count() == 0

    for step in (2, 3, 4):  # published while the page watches
        publish(run, EventType.METRICS, {"step": step, "values": {
            "reward/mean": 0.5, **staleness(step), "time/phases": PHASES[step]}}, at=started + 20 + step)
        page.wait_for_selector(f'#phase-timeline .phase-row[data-step="{step}"] .phase-bar', timeout=30_000)

    # Step 1: a row that says so, and no bar.
    old = page.locator('#phase-timeline .phase-row[data-step="1"]')
    assert old.get_attribute("data-recorded") == "none"
    assert "not recorded" in old.inner_text()
    assert bars(page, 1) == []
    # Each recorded phase is one bar with the trainer's interval; step 4's sync, not recorded, is none.
    for step, phases in PHASES.items():
        drawn = bars(page, step)
        assert {bar["phase"]: [bar["start"], bar["end"]] for bar in drawn} == phases
        assert all(bar["width"] > 0 for bar in drawn)
    assert page.locator('#phase-timeline .phase-row[data-step="4"]').get_attribute("data-recorded") == "some"
    assert "weight sync: not recorded" in page.locator('#phase-timeline .phase-row[data-step="4"]').get_attribute("aria-label")
    # One axis for every step: step 3's generation starts, on screen, before step 2's learning ends.
    step2, step3 = {b["phase"]: b for b in bars(page, 2)}, {b["phase"]: b for b in bars(page, 3)}
    assert step3["generation"]["left"] < step2["learning"]["right"]
    # Same seconds, same pixels: the scale is shared (14.0 s is step 2's learning start and step 3's lean end ≈ 22.0 s).
    scale = (step2["learning"]["right"] - step2["learning"]["left"]) / 6.0
    assert step3["learning"]["width"] == pytest.approx(5.0 * scale, rel=0.02)
    axis = page.locator("#phase-timeline .phase-axis-label").inner_text()
    assert axis == "seconds since attempt 1 of the run started"
    assert all(tick.endswith(" s") for tick in page.locator("#phase-timeline .phase-tick").all_inner_texts())

    # The staleness chart: a gap at step 1 (not measured), never a 0.
    drawn = page.evaluate("document.querySelector('[data-chart=staleness]').stepChart.plot.data")
    assert drawn[0] == [1, 2, 3, 4] and drawn[1] == [None, 0.5, 0.5, 0.5] and drawn[2] == [None, 1, 1, 1]
    page.locator("details.latest-metrics summary").click()
    table = page.locator("#latest-metrics").inner_text()
    assert "staleness, max (updates behind)" in table and "learner waiting for its batch (s)" in table

    # A rollout arriving live says which policy wrote it, beside its step.
    publish(run, EventType.ROLLOUT_FINISHED, RolloutFinished(
        rollout_key="a1-s4-p0-r0", step=4, problem_id="p0", response="<think>x</think>", verdict="lean_error", reward=0.0,
        policy_version=2).model_dump(mode="json"))
    card = page.locator('#rollouts li[data-rollout-key="a1-s4-p0-r0"] .rollout-head')
    card.wait_for(timeout=30_000)
    assert "step 4 (written by policy v2)" in card.inner_text()

    shot = screenshot(page, "run-page-step-phases")
    page.locator("section.step-phases").screenshot(path=str(shot.with_name("run-page-step-phases-section.png")))


def test_a_resumed_run_draws_only_its_latest_attempts_steps_on_that_attempts_clock(page, alice, make_run):
    run = make_run(state=RunState.STARTING, name="resumed run")
    started = time.time() - 120
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 3}, at=started)
    for step in (1, 2):
        publish(run, EventType.METRICS, {"step": step, "values": {"time/phases": PHASES[step + 1]}}, at=started + step)
    wait_until(lambda: run.step_metrics.count() == 2, what="attempt 1's two steps to be stored")
    # Resumed after step 2: attempt 2's clock starts again at 0, so its step 3 cannot share attempt 1's axis.
    Run.objects.filter(pk=run.pk).update(attempt=2, state=RunState.STARTING)
    publish(run, EventType.RUN_STARTED, {"step": 2, "total_steps": 3, "resumed_from_step": 2}, at=started + 60)
    publish(run, EventType.METRICS, {"step": 3, "values": {"time/phases": {"generation": [0.5, 4.0]}}}, at=started + 65)
    wait_until(lambda: run.step_metrics.count() == 3, what="attempt 2's step to be stored")

    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector('#phase-timeline .phase-row[data-step="3"]')
    assert page.locator("#phase-timeline .phase-row").count() == 1
    timeline = page.locator("#phase-timeline").inner_text()
    assert "2 steps of earlier attempts are not drawn" in timeline
    assert page.locator("#phase-timeline .phase-axis-label").inner_text() == "seconds since attempt 2 of the run started"
