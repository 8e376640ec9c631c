"""Every number, word and button on a run page is true (issue 14; the run page points of issue 17).

Events reach the pages the way the trainer sends them: onto the run's Redis Stream, stored by the
platform's own ingester. One page load checks several points; each assertion names its point.
"""

import re
import time

import pytest
from django.db import transaction

from runs.models import Run, RunState, job_id_for
from tests.browser.conftest import forget_refused_load, log_in, screenshot
from tests.browser.trainer_events import publish, wait_for_state, wait_until
from trainer.config import RunConfig
from trainer.observability.events import EventType

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$")


def chart_data(page, name):
    """The data a step chart draws: [steps, series…], nulls where nothing was measured (None: no such chart)."""
    return page.evaluate(f"document.querySelector('[data-chart={name}]')?.stepChart?.plot?.data ?? null")


class Points:
    """Several points checked on one page load; each that fails is reported in its own words."""

    def __init__(self):
        self.failed = []

    def check(self, holds, message):
        if not holds:
            self.failed.append(message)

    def assert_all(self):
        assert not self.failed, "\n".join(self.failed)


def sft_metrics(step):
    return {"sft_loss": 2.0 / step, "learning_rate": 1e-4 * min(1, step / 2), "grad_norm": 1.5 + step / 10,
            "tokens_per_second": 900.0 + step, "epoch": 1 + (step > 6), "total_steps": 12}


def test_a_finished_sft_run_shows_its_twelve_steps_loss_learning_rate_and_gradient_norm(page, alice, make_run):
    run = make_run(state=RunState.STARTING, kind="sft", name="warm start")
    started = time.time() - 60
    publish(run, EventType.RUN_STARTED, {"step": 0, "kind": "sft", "total_steps": 12, "config": run.config}, at=started)
    for step in range(1, 13):
        publish(run, EventType.METRICS, {"step": step, "values": sft_metrics(step)}, at=started + step * 0.4)
    publish(run, EventType.CHECKPOINT_SAVED, {"step": 12, "path": "/nowhere/step-000012", "kind": "sft"}, at=started + 4.9)
    publish(run, EventType.RUN_FINISHED, {"status": "succeeded", "reason": "", "step": 12, "kind": "sft"}, at=started + 5)
    wait_for_state(run, RunState.SUCCEEDED)

    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live]")
    points = Points()
    facts = page.locator(".run-facts").inner_text()
    points.check("Succeeded" in facts and "step 12 of 12" in facts, f"warm-start SFT: the step count is wrong in {facts!r}")
    # A run that trained 5 s (its start and end stored in one batch) says 5 s, not 0 s.
    elapsed = page.locator("#run-elapsed").inner_text()
    points.check(elapsed == "5 s", f"a run that trained 5 s shows elapsed {elapsed!r}")
    for name, key in (("sft_loss", "sft_loss"), ("learning_rate", "learning_rate"), ("grad_norm", "grad_norm")):
        data = chart_data(page, name)
        points.check(data is not None and data[0] == list(range(1, 13))
                     and data[1] == pytest.approx([sft_metrics(step)[key] for step in range(1, 13)]),
                     f"the {name} chart does not draw the stored series: {data}")
    points.check(page.locator(".chart-empty:visible").count() == 0,
                 "a chart of the SFT run says 'No data yet' although its series is stored")
    points.check(page.locator("#rollout-filters, #rollouts").count() == 0, "an SFT run has no rollouts, but rollout filters are shown")
    log = page.locator("#logs").inner_text()
    points.check("trainer started" in log and "run succeeded after step 12" in log, f"the finished run's trainer log: {log!r}")
    page.wait_for_selector("body[data-live=connected]")
    status = page.locator("#live-status").inner_text()
    points.check(status == "finished", f"a finished run says {status!r} instead of 'finished'")
    points.assert_all()
    screenshot(page, "sft-run")


def test_an_rl_run_draws_gaps_integer_steps_and_says_when_it_evaluates_and_what_checkpoints_weigh(
        page, alice, make_run, settings):
    config = RunConfig.from_preset("cpu-demo", {"schedule": {"total_steps": 5}}).to_json_dict()
    run = make_run(state=RunState.STARTING, name="all format errors", config=config)
    folder = settings.ARTIFACTS_DIR / "runs" / str(run.pk) / "checkpoints" / "step-000002"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "model.safetensors").write_bytes(b"\0" * 1_500_000)
    (folder / "optimizer.pt").write_bytes(b"\0" * 500_000)
    now = time.time()
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 5, "config": config}, at=now - 30)
    # Step 1: every answer a format error, no retry: nothing reached Lean, nothing was retried.
    publish(run, EventType.METRICS, {"step": 1, "values": {
        "reward/mean": 0.0, "reward/first_attempt": 0.0, "reward/retry": None, "lean/accuracy": None,
        "format_errors": {"no_valid_think_block": 16}, "rollouts": 16}}, at=now - 20)
    publish(run, EventType.METRICS, {"step": 2, "values": {
        "reward/mean": 0.5, "reward/first_attempt": 0.4, "reward/retry": 0.75, "lean/accuracy": 0.6,
        "format_errors": {}, "rollouts": 16}}, at=now - 10)
    publish(run, EventType.CHECKPOINT_SAVED, {"step": 2, "path": str(folder)}, at=now - 9)
    publish(run, EventType.METRICS, {"step": 3, "values": {
        "reward/mean": 0.0, "reward/first_attempt": 0.0, "reward/retry": None, "lean/accuracy": None,
        "format_errors": {"no_valid_think_block": 16}, "rollouts": 16}}, at=now - 5)
    wait_until(lambda: run.checkpoints.exists() and run.step_metrics.count() == 3, what="the stored metrics")

    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.wait_for_selector("body[data-live=connected]")
    points = Points()
    accuracy = chart_data(page, "accuracy")
    points.check(accuracy is not None and accuracy[1][0] is None and accuracy[1][1] == pytest.approx(0.6)
                 and accuracy[1][2] is None,
                 f"Lean-only accuracy with nothing sent to Lean must be a gap, not 0: {accuracy}")
    reward = page.evaluate("(() => { const p = document.querySelector('[data-chart=reward]').stepChart?.plot;"
                           " return p ? {labels: p.series.map(s => s.label), data: p.data, spans: p.series.map(s => s.spanGaps)}"
                           " : {labels: ['retries'], data: [null], spans: [true, true]}; })()")
    retries = reward["data"][reward["labels"].index("retries")]
    points.check(retries is not None and retries[0] is None and retries[2] is None,
                 f"steps without retries draw the retries' reward: {retries}")
    points.check(not any(reward["spans"][1:]), "lines are drawn across steps where nothing was measured (spanGaps)")
    for bounded in ("reward", "format_errors", "accuracy"):
        y = page.evaluate(f"(() => {{ const s = document.querySelector('[data-chart={bounded}]').stepChart?.plot?.scales.y;"
                          " return s ? [s.min, s.max] : null; })()")
        points.check(y == [0, 1], f"the {bounded} chart's axis runs {y}, not from 0 to 1 (a share or a reward)")
    ticks = page.evaluate("document.querySelector('[data-chart=reward]').stepChart?.plot.axes[0]._values ?? null")
    points.check(ticks and all(re.fullmatch(r"\d+", str(tick)) for tick in ticks), f"fractional step ticks: {ticks}")
    note = page.locator("[data-chart=evaluation] .chart-empty").inner_text()
    points.check("every 10 steps" in note and "will not evaluate" in note,
                 f"the empty evaluation chart of a 5-step run that evaluates every 10 says: {note!r}")
    links = page.locator("#checkpoints tr[data-step='2'] td").nth(3).inner_text()
    points.check("2.0 MB" in links and "1.5 MB" in links, f"checkpoint links without their size: {links!r}")
    status = page.locator("#live-status").inner_text()
    points.check(status == "live", f"a running run says {status!r}, not 'live'")

    page.goto("/runs/")
    listed = page.locator(f"tr[data-run-id='{run.pk}'] td.accuracy .value").inner_text()
    points.check(listed == "–", f"the runs list says Lean accuracy {listed!r} for a step where nothing reached Lean")
    points.assert_all()

    # ?step=abc is an error, not an empty list.
    response = page.goto(f"/runs/{run.pk}/?step=abc")
    assert response.status == 400
    forget_refused_load(page, 400)
    assert "Enter a whole number" in page.locator("#filter-errors").inner_text()
    assert "No rollouts yet" not in page.locator("#rollouts").inner_text(), "?step=abc read as 'no rollouts yet'"
    screenshot(page, "rl-run-gaps")


def test_a_cancelled_then_resumed_run_shows_the_same_elapsed_time_in_the_list_and_on_its_page(page, alice, make_run):
    run = make_run(state=RunState.STARTING, name="resumed")
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 20}, at=time.time() - 120)
    wait_for_state(run, RunState.RUNNING)
    # In one transaction: the session's real scheduler and worker, woken once it commits, must find the
    # second attempt already taken by the worker this test plays, or they would dispatch it to Ray themselves.
    with transaction.atomic():
        assert run.transition(RunState.CANCELLED, reason="cancelled by its owner")  # as the Cancel button does
        assert run.transition(RunState.QUEUED, reason="resumed")
        assert run.transition(RunState.STARTING, reason="submitting to Ray")
    time.sleep(3.5)  # the second attempt trains 3 s after the resume, and reports both ends before they are stored
    second = time.time() - 3
    publish(run, EventType.RUN_STARTED, {"step": 0, "total_steps": 20}, at=second)
    publish(run, EventType.RUN_FINISHED, {"status": "succeeded", "reason": "", "step": 20}, at=second + 3)
    wait_for_state(run, RunState.SUCCEEDED)

    log_in(page, "alice", "alice-password")
    page.goto("/runs/")
    row = page.locator(f"tr[data-run-id='{run.pk}']")
    listed = row.locator("td.elapsed").inner_text()
    created = row.locator("td.created").inner_text()
    assert TIMESTAMP.match(created), f"the Created column reads {created!r}"
    page.goto(f"/runs/{run.pk}/")
    shown = page.locator("#run-elapsed").inner_text()
    assert listed == shown, f"elapsed disagrees: {listed!r} in the list, {shown!r} on the page"
    assert re.fullmatch(r"2 min 0[3-6] s", shown), f"two attempts (120 s, then 3 s) trained {shown!r}"
    for stamp in page.locator("#timeline li").all_inner_texts():
        assert TIMESTAMP.match(stamp.split(" · ")[1].split(" — ")[0]), f"a timeline moment reads {stamp!r}"


def test_cancel_asks_first_and_resume_without_a_checkpoint_says_it_starts_again(page, alice, make_run):
    gpu_config = RunConfig.from_preset("h100x8").to_json_dict()
    run = make_run(state=RunState.RUNNING, name="gpu run", preset="h100x8", config=gpu_config)
    questions = []

    def answer(dialog):
        questions.append(dialog.message)
        dialog.dismiss() if len(questions) == 1 else dialog.accept()

    page.on("dialog", answer)
    log_in(page, "alice", "alice-password")
    page.goto(f"/runs/{run.pk}/")
    page.click("#cancel-run")
    page.wait_for_timeout(300)
    assert questions and "8 GPUs" in questions[0], f"Cancel of a GPU run asked {questions!r}"
    run.refresh_from_db()
    assert run.state == RunState.RUNNING, "declining the confirmation still cancelled the run"
    page.click("#cancel-run")
    page.wait_for_selector("#run-state.state-cancelled")

    # No checkpoint: the button and the message say it starts again from step 0.
    button = page.locator("#resume-run").inner_text()
    assert "step 0" in button and "no checkpoint" in button, f"the resume button says {button!r}"
    # Dispatching it is refused at once (the cluster has no 8 GPUs), so nothing is started on Ray.
    page.click("#resume-run")
    page.wait_for_load_state()
    message = page.locator(".messages").inner_text()
    assert "starts again from step 0" in message, f"resuming a run without a checkpoint said {message!r}"
    assert "continues from its last checkpoint" not in message


def test_a_starting_run_whose_job_waits_for_cpus_says_it_is_waiting_and_why(page, alice, make_run, ray_head):
    from django.conf import settings
    from ray.job_submission import JobSubmissionClient

    from runs import ray_jobs

    holder = make_run(state=RunState.RUNNING, name="holds the cpus")
    waiting = make_run(state=RunState.STARTING, name="waits")
    # The two runs' jobs, under the ids the platform gives their attempts: the sweeper then takes them for
    # what they are (a running trainer, a pending one) instead of ending runs whose job it cannot find.
    client = JobSubmissionClient(settings.RAY_ADDRESS)
    holder_job = client.submit_job(entrypoint="sleep 120", entrypoint_num_cpus=2,
                                   submission_id=job_id_for(holder.pk, holder.attempt))
    waiting_job = None
    try:
        wait_until(lambda: ray_jobs.status(holder_job).state == "RUNNING", timeout_s=60, what="the job holding the CPUs")
        waiting_job = client.submit_job(entrypoint="sleep 1", entrypoint_num_cpus=2,
                                        submission_id=job_id_for(waiting.pk, waiting.attempt))
        Run.objects.filter(pk=holder.pk).update(ray_job_id=holder_job)
        Run.objects.filter(pk=waiting.pk).update(ray_job_id=waiting_job)
        log_in(page, "alice", "alice-password")
        page.goto(f"/runs/{waiting.pk}/")
        note = page.wait_for_selector("#run-waiting:not([hidden])", timeout=15_000).inner_text()
        assert "Waiting for the cluster" in note and "2 CPUs" in note, f"a pending run says {note!r}"
        assert f"#{holder.pk} “holds the cpus”" in note, f"it does not say which run holds the CPUs: {note!r}"
    finally:
        # End both runs first: the ingester's job reconciler must never meet a stopped job whose run
        # this test's teardown is about to delete (it fails on a run that vanished mid-reconcile).
        Run.objects.filter(pk__in=(holder.pk, waiting.pk)).update(state=RunState.CANCELLED, ray_job_id="")
        for job in (waiting_job, holder_job):
            if job:
                client.stop_job(job)
        # The CPUs are free again before the next test launches a run of its own.
        for job in (waiting_job, holder_job):
            if job:
                wait_until(lambda job=job: ray_jobs.status(job).is_terminal, timeout_s=60, what=f"Ray job {job} to stop")
