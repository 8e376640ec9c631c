"""A problem's platform win rate, which curation filters on, counts real Lean's verdicts only; where a promptset
has only the stand-in's, the win rate is the stand-in's and every place that uses it says so."""

import pytest

from promptsets import results, versions
from promptsets.curation import DropAboveWinRate, WinRateSource, describe_rule
from promptsets.models import Problem
from proofs.models import ProofAttempt, Turn
from tests.stored_attempts import stored_attempt

pytestmark = pytest.mark.django_db


def attempt(run, key, reward, *, standin):
    problem = Problem.objects.get(problem_key=key)
    return stored_attempt(run=run, rollout_key=f"{key}-{reward}-{standin}-{ProofAttempt.objects.count()}",
                          step=1, problem=problem, problem_key=key, turn=Turn.FIRST, reward=reward,
                          is_standin_verdict=standin)


def test_real_lean_verdicts_are_never_pooled_with_the_standins(alice, make_run, promptset_version):
    run = make_run(state="running")
    attempt(run, "add_small", 1.0, standin=True)
    attempt(run, "add_small", 1.0, standin=True)
    attempt(run, "add_small", 0.0, standin=False)
    solved = Problem.objects.get(problem_key="add_small")
    rates, verified_by = results.platform_win_rates([solved.pk], viewer=alice)
    assert (rates[solved.pk], verified_by) == ((0, 1), results.LEAN)
    assert results.win_rates([solved.pk], viewer=alice, verified_by=results.STANDIN)[solved.pk] == (2, 2)


def test_curation_on_real_lean_says_so_on_the_version_it_makes(alice, make_run, promptset_version):
    run = make_run(state="running")
    attempt(run, "add_small", 1.0, standin=False)
    attempt(run, "add_small", 1.0, standin=True)
    attempt(run, "mul_small", 0.0, standin=True)  # the stand-in's: not counted where Lean has spoken
    (curated,) = versions.curate(promptset_version, DropAboveWinRate(max_win_rate=0.5,
                                                                   win_rate_source=WinRateSource.PLATFORM))
    assert "add_small" not in [row["problem_id"] for row in curated.trainer_rows()]
    assert curated.rule["win_rates_verified_by"] == "lean"
    assert "real Lean's verdicts only" in describe_rule(curated.rule)


def test_with_only_the_standins_verdicts_curation_and_the_problem_page_say_the_win_rate_is_the_standins(
        alice, alices_client, make_run, promptset_version):
    run = make_run(state="running")
    attempt(run, "add_small", 1.0, standin=True)
    (curated,) = versions.curate(promptset_version, DropAboveWinRate(max_win_rate=0.5,
                                                                   win_rate_source=WinRateSource.PLATFORM))
    assert curated.rule["win_rates_verified_by"] == "stand-in"
    assert "stand-in Lean server's verdicts" in describe_rule(curated.rule)
    problem = Problem.objects.get(problem_key="add_small")
    page = alices_client.get(f"/promptsets/{promptset_version.promptset_id}/problems/{problem.pk}/").content.decode()
    assert "the stand-in's win rate, not real Lean's" in page and "stand-in Lean server&#x27;s verdicts" in page
