"""An RL run's periodic evaluations count as evaluations of its checkpoints: each one that kept its samples is a
column of the benchmark's solved matrix, comparable with any other evaluation, each cell leading to its samples;
the training rollouts of the same step never count, and one published by an older trainer says it has only
figures (through Django's client; on the real stack in Chromium: tests/browser)."""

import pytest

from tests.evaluations.leaderboard_cast import periodic_evaluations

pytestmark = pytest.mark.django_db


def columns(page):
    return {row.key: row for row in page.context["with_samples"]}


def test_each_periodic_evaluation_with_samples_is_a_column_and_the_older_one_is_named_without_one(
        alices_client, alice):
    benchmark, run, _ = periodic_evaluations(alice)
    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    assert set(columns(page)) == {f"{run.pk}:1", f"{run.pk}:2"}
    assert [row.key for row in page.context["figures_only"]] == [f"{run.pk}:3"]
    html = page.content.decode()
    assert "in-run evaluation at step 3" in html.split('id="figures-only"')[1]
    assert len(page.context["standin_rows"]) == 3  # all three are leaderboard rows


def test_a_cell_says_what_that_evaluations_samples_say_and_not_what_training_rollouts_of_its_step_did(
        alices_client, alice):
    benchmark, run, problems = periodic_evaluations(alice)
    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    cells = {problem.problem_key: [state for _, state, _ in states] for problem, states in page.context["matrix"]}
    order = [row.key for row in page.context["with_samples"]]
    by_column = {key: {p: cells[p][order.index(key)] for p in cells} for key in order}
    step_one, step_two = by_column[f"{run.pk}:1"], by_column[f"{run.pk}:2"]
    # Step 1's training rollout solved problem 1; its evaluation did not. A censored sample never hides a failure.
    assert [step_one[p.problem_key] for p in problems] == ["solved", "failed", "failed"]
    # Step 2: the resumed attempt's evaluation (attempt 1's had solved problem 0; so had a training rollout).
    assert [step_two[p.problem_key] for p in problems] == ["failed", "solved", "failed"]
    assert all(state == "" for key in order for p, state in by_column[key].items()
               if p not in {problem.problem_key for problem in problems})


def test_newly_solved_and_lost_between_two_periodic_evaluations_and_against_each_other_way(alices_client, alice):
    benchmark, run, problems = periodic_evaluations(alice)
    forward = alices_client.get(f"/benchmarks/{benchmark.pk}/",
                                {"before": f"{run.pk}:1", "after": f"{run.pk}:2"}).context["difference"]
    assert [p.problem_key for p in forward["newly_solved"]] == [problems[1].problem_key]
    assert [p.problem_key for p in forward["lost"]] == [problems[0].problem_key]
    backward = alices_client.get(f"/benchmarks/{benchmark.pk}/",
                                 {"before": f"{run.pk}:2", "after": f"{run.pk}:1"}).context["difference"]
    assert backward["newly_solved"] == forward["lost"] and backward["lost"] == forward["newly_solved"]
    figures_only = alices_client.get(f"/benchmarks/{benchmark.pk}/",
                                     {"before": f"{run.pk}:1", "after": f"{run.pk}:3"}).context["difference"]
    assert figures_only is None  # no samples, nothing to compare


def test_a_cell_links_to_that_evaluations_samples_in_the_proof_viewer_and_to_nothing_else(alices_client, alice):
    benchmark, run, problems = periodic_evaluations(alice)
    html = alices_client.get(f"/benchmarks/{benchmark.pk}/").content.decode()
    link = f"/runs/{run.pk}/?problem={problems[0].problem_key}&amp;purpose=evaluation&amp;step=2#rollouts"
    assert link in html
    viewer = alices_client.get(f"/runs/{run.pk}/", {"problem": problems[0].problem_key, "purpose": "evaluation",
                                                    "step": 2})
    shown = [attempt.rollout_key for attempt in viewer.context["attempts"]]
    # Both attempts' evaluation samples of step 2 (the viewer lists what was stored), no training rollout.
    assert sorted(shown) == sorted([f"a2-eval2-p{problems[0].pk}-r0", f"a2-eval2-p{problems[0].pk}-r1",
                                    f"a1-eval2-p{problems[0].pk}-r0", f"a1-eval2-p{problems[0].pk}-r1"])
