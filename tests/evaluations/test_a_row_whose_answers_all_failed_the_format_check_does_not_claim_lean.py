"""The leaderboard's "Verified by" says what verified the row: the stand-in, Lean, or, when every stored sample
failed the format check so none was sent to Lean (a small model's usual evaluation), the format check alone."""

import pytest

from proofs.leaderboard import NO_VERDICT_LABEL
from tests.evaluations.leaderboard_cast import evaluation_values, periodic_evaluations
from proofs.models import ProofAttempt
from runs.models import Evaluation

pytestmark = pytest.mark.django_db


def test_an_evaluation_whose_every_answer_failed_the_format_check_says_so_instead_of_lean(alices_client, alice):
    benchmark, run, problems = periodic_evaluations(alice)
    Evaluation.objects.create(run=run, step=4, values=evaluation_values({p.problem_key: [0.0] for p in problems},
                                                                        standin=False))
    for problem in problems:
        ProofAttempt.objects.create(run=run, rollout_key=f"a2-eval4-p{problem.pk}-r0", run_attempt=2, step=4,
                                    is_evaluation=True, problem=problem, problem_key=problem.problem_key, reward=0.0,
                                    format_error="no_valid_lean4_code_block")
    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    [row] = page.context["real_rows"]
    assert row.key == f"{run.pk}:4" and row.verified_by == NO_VERDICT_LABEL
    html = page.content.decode()
    assert f'<td class="verified-by">{NO_VERDICT_LABEL}</td>' in html
    # The rows whose samples the stand-in decided stay apart and say so.
    assert {r.verified_by for r in page.context["standin_rows"]} == {"stand-in (not Lean)"}
