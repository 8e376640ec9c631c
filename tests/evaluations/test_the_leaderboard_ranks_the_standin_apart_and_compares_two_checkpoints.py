"""The benchmark page: evaluations beside the published rows, the stand-in's apart and labelled, and what
two checkpoints of one run solved, problem by problem (through Django's client; Chromium: tests/browser)."""

import pytest

from tests.evaluations.leaderboard_cast import two_checkpoint_evaluations

pytestmark = pytest.mark.django_db


def test_the_published_rows_and_the_standin_rows_are_separate_and_labelled(alices_client, alice):
    benchmark, _, _, _ = two_checkpoint_evaluations(alice)
    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    assert page.status_code == 200
    board = page.context
    assert board["real_rows"] == [] and len(board["standin_rows"]) == 2
    html = page.content.decode()
    assert "Kimina-Prover-Distill-1.7B" in html and "published, not measured here" in html
    assert html.count('class="standin-row"') == 2 and "stand-in (not Lean)" in html


def test_newly_solved_and_lost_between_two_checkpoints_of_one_run(alices_client, alice):
    benchmark, _, problems, (first, second) = two_checkpoint_evaluations(alice)
    page = alices_client.get(f"/benchmarks/{benchmark.pk}/", {"before": f"{first.pk}:0", "after": f"{second.pk}:0"})
    difference = page.context["difference"]
    assert [p.problem_key for p in difference["newly_solved"]] == [problems[1].problem_key]
    assert [p.problem_key for p in difference["lost"]] == [problems[0].problem_key]
    cells = dict(page.context["matrix"])
    assert [state for _, state, _ in cells[problems[0]]] == ["solved", "failed"]
    assert [state for _, state, _ in cells[problems[3 - 1]]] == ["failed", "failed"]
    assert f'/runs/{first.pk}/?problem={problems[0].problem_key}' in page.content.decode()


def test_a_stranger_sees_no_evaluation_of_alices(client, alice, charlie):
    benchmark, _, _, _ = two_checkpoint_evaluations(alice)
    client.force_login(charlie)
    page = client.get(f"/benchmarks/{benchmark.pk}/")
    assert page.status_code == 200 and page.context["rows"] == []
    assert "Kimina-Prover-Distill-1.7B" in page.content.decode()  # the published rows are everyone's


def test_a_benchmark_one_may_not_see_is_a_404(client, alice, charlie, promptset_version):
    from promptsets.benchmarks import mark_as_benchmark

    private = mark_as_benchmark(promptset_version, alice)
    client.force_login(charlie)
    assert client.get(f"/benchmarks/{private.pk}/").status_code == 404
