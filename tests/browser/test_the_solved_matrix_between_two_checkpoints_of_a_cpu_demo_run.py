"""A real cpu-demo RL run on the real stack (the launch form, Celery, Ray, SmolLM2-135M, the stand-in Lean
server, the ingester) evaluates itself at both of its checkpoints on a promptset version alice marked as a
benchmark; the leaderboard shows both periodic evaluations, its solved matrix agrees with the samples they
stored, the difference form between the two agrees with the matrix, and a cell leads to that evaluation's
samples in the proof viewer.

What SmolLM2 solves is not known in advance (from the bare model, with answers cut at 16 tokens, most likely
nothing), so the test asserts what must hold for any outcome, never a problem's name. The run starts from
SmolLM2 itself: the test stack builds no warm start (runs/warm_start.py, not configured here).
"""

import re
import shutil
import time

import pytest

from proofs.leaderboard import NO_VERDICT_LABEL
from proofs.models import ProofAttempt
from runs.models import FINAL_STATES, Evaluation, Run, RunState
from tests.browser.conftest import fill_launch_fields, log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STATES = {"solved", "failed", "censored"}
EVAL_SAMPLES = 2


def mark_as_benchmark(page, alice, promptset_version):
    from accounts.models import ApiToken, TokenScope

    _, token = ApiToken.issue(alice, "benchmark", scope=TokenScope.LAUNCH)
    response = page.request.post("/api/benchmarks/", headers={"Authorization": f"Bearer {token}"},
                                 data={"promptset_version_id": promptset_version.pk, "name": "arith bench"})
    assert response.status == 201, response.text()
    return response.json()["id"]


def launch_short_cpu_demo_run(page):
    """Two steps, a checkpoint and an evaluation after each, short answers: the preset's path, kept small."""
    page.goto("/runs/new/")
    page.fill("#id_name", "learning arithmetic")
    page.select_option("#id_promptset_version", label="arith v1")
    page.select_option("#id_kind", "rl")
    page.select_option("#id_preset", "cpu-demo")
    fill_launch_fields(page, {"total_steps": 2, "prompts_per_step": 2, "samples_per_prompt": 2, "max_response_tokens": 16,
                              "eval_every": 1, "checkpoint_every": 1, "eval_samples": EVAL_SAMPLES})
    with page.expect_navigation():
        page.click("#launch-form button[type=submit]")
    assert re.search(r"/runs/\d+/$", page.url), f"the launch was refused: {page.locator('main').inner_text()}"
    return Run.objects.get(name="learning arithmetic")


def wait_until_final(run, platform_logs, timeout_s=660):  # vLLM compiles first: minutes on a loaded machine
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in FINAL_STATES:
            break
        time.sleep(1)
    assert run.state == RunState.SUCCEEDED, f"the run is {run.state}: {run.failure_reason}\n{platform_logs()}"


def stored_states(run, step) -> dict[str, str]:
    """Per problem key, what that evaluation's stored samples say (any reward 1: solved; else any 0: failed)."""
    rewards: dict[str, list] = {}
    for key, reward in ProofAttempt.objects.filter(run=run, step=step, is_evaluation=True).values_list(
            "problem_key", "reward"):
        rewards.setdefault(key, []).append(reward)
    return {key: "solved" if any(r is not None and r >= 1 for r in found)
            else "failed" if any(r is not None for r in found) else "censored" for key, found in rewards.items()}


def test_the_leaderboard_compares_the_two_checkpoints_of_a_real_cpu_demo_run_and_leads_to_their_samples(
        page, alice, promptset_version, platform_logs):
    log_in(page, "alice", "alice-password")
    benchmark_id = mark_as_benchmark(page, alice, promptset_version)
    started = time.monotonic()
    run = launch_short_cpu_demo_run(page)
    wait_until_final(run, platform_logs)
    print(f"the cpu-demo run took {time.monotonic() - started:.0f} s from launch to succeeded")
    assert sorted(Evaluation.objects.filter(run=run).values_list("step", flat=True)) == [1, 2]
    assert sorted(run.checkpoints.values_list("step", flat=True)) == [1, 2]
    problem_keys = [entry.problem.problem_key for entry in promptset_version.entries.order_by("position")]
    for step in (1, 2):  # every problem's every first attempt was kept, beside the step's training rollouts
        first_attempts = ProofAttempt.objects.filter(run=run, step=step, is_evaluation=True, turn="first")
        assert first_attempts.count() == len(problem_keys) * EVAL_SAMPLES
        assert ProofAttempt.objects.filter(run=run, step=step, is_evaluation=False).count() == 2 * 2

    page.goto("/benchmarks/")
    page.click("text=arith bench")
    page.wait_for_url(re.compile(rf"/benchmarks/{benchmark_id}/$"))
    keys = [f"{run.pk}:1", f"{run.pk}:2"]
    for step, key in zip((1, 2), keys):  # a leaderboard row each, wherever its verdicts rank it, saying what verified it
        row = page.locator(f"#leaderboard tr[data-row='{key}'], #standin-leaderboard tr[data-row='{key}']")
        assert row.count() == 1
        # A format failure of a stand-in run counts under the stand-in but is no verdict of it: only verdicts label.
        samples = ProofAttempt.objects.filter(run=run, step=step, is_evaluation=True)
        expected = ("stand-in (not Lean)" if samples.filter(is_standin_verdict=True).exclude(verdict="").exists()
                    else "Lean" if samples.exclude(verdict="").exists() else NO_VERDICT_LABEL)
        assert row.locator("td.verified-by").inner_text() == expected
    columns = page.locator("#solved-matrix thead th[data-row]").evaluate_all("cells => cells.map(c => c.dataset.row)")
    assert columns == keys, f"the matrix's columns are {columns}"
    assert page.locator("#figures-only").count() == 0

    shown = {}
    for problem_key in problem_keys:
        cells = page.locator(f"#solved-matrix tr[data-problem='{problem_key}'] td.cell").all_inner_texts()
        shown[problem_key] = [cell.strip() for cell in cells]
        assert len(shown[problem_key]) == 2 and set(shown[problem_key]) <= STATES, shown[problem_key]
    for column, step in enumerate((1, 2)):
        assert {key: states[column] for key, states in shown.items()} == stored_states(run, step)
    screenshot(page, "benchmark-matrix-of-a-cpu-demo-run")

    page.select_option("select[name=before]", keys[0])
    page.select_option("select[name=after]", keys[1])
    page.click("#difference-choice button[type=submit]")
    page.wait_for_url(re.compile(r"after="))
    newly_solved = page.locator("#difference .newly-solved").all_inner_texts()
    lost = page.locator("#difference .lost").all_inner_texts()
    assert sorted(newly_solved) == sorted(k for k, (before, after) in shown.items()
                                          if before != "solved" and after == "solved")
    assert sorted(lost) == sorted(k for k, (before, after) in shown.items() if before == "solved" and after != "solved")
    text = page.locator("#difference").inner_text()
    assert f"Newly solved ({len(newly_solved)})" in text and f"Lost ({len(lost)})" in text

    problem_key = problem_keys[0]
    page.locator(f"#solved-matrix tr[data-problem='{problem_key}'] td.cell a").nth(1).click()
    page.wait_for_url(re.compile(rf"/runs/{run.pk}/\?problem=.*purpose=evaluation.*step=2"))
    cards = page.locator("#rollouts > li.rollout")
    samples = ProofAttempt.objects.filter(run=run, step=2, is_evaluation=True, problem_key=problem_key)
    assert cards.count() == samples.count() >= EVAL_SAMPLES
    assert all("evaluation of step 2" in head for head in page.locator("#rollouts .rollout-head").all_inner_texts())
    shown_keys = set(cards.evaluate_all("cards => cards.map(c => c.dataset.rolloutKey)"))
    assert shown_keys == set(samples.values_list("rollout_key", flat=True))
    assert page.locator("#id_purpose").input_value() == "evaluation"
    screenshot(page, "evaluation-samples-of-step-2")
    # Its two SmolLM2 checkpoints are 3 GB: gone once compared, not left for the rest of the session (the CI disk).
    shutil.rmtree(run.artifacts_dir, ignore_errors=True)
