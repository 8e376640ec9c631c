"""best@k (verl's bootstrap), unbiased pass@k, and the same after one retry, on hand-made numbers."""

from __future__ import annotations

import math

import numpy
import pytest

from trainer.loop.evaluation import (
    Outcome,
    bootstrap_best_at_k,
    evaluation_report,
    pass_at_k,
    problem_metrics,
    verl_subset_sizes,
    with_one_retry,
)


def test_pass_at_k_matches_one_minus_the_binomial_ratio():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    # n=8, c=2, k=4: 1 - C(6,4)/C(8,4) = 1 - 15/70
    assert pass_at_k(8, 2, 4) == pytest.approx(1 - 15 / 70)
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)


def test_pass_at_k_is_one_when_fewer_than_k_samples_failed_and_zero_with_no_success():
    assert pass_at_k(4, 3, 2) == 1.0
    assert pass_at_k(4, 0, 4) == 0.0


def test_pass_at_k_stays_exact_where_the_binomials_would_overflow():
    assert pass_at_k(2000, 1, 1000) == pytest.approx(0.5)


def test_pass_at_k_refuses_k_above_the_number_of_samples():
    with pytest.raises(ValueError, match="lower k"):
        pass_at_k(2, 1, 3)


def test_best_at_k_is_the_mean_best_of_k_draws_with_replacement():
    # One success in two: best of 2 draws with replacement is 1 with probability 3/4.
    mean, std = bootstrap_best_at_k([1.0, 0.0], 2, resamples=20000, seed=0)
    assert mean == pytest.approx(0.75, abs=0.01)
    assert std == pytest.approx(math.sqrt(0.75 * 0.25), abs=0.01)


def test_best_at_k_follows_verls_bootstrap_for_the_same_draws():
    scores = [0.0, 1.0, 0.0, 0.0, 1.0]
    generator = numpy.random.default_rng(7)
    draws = generator.integers(0, 5, size=(100, 4))
    expected = numpy.asarray(scores)[draws].max(axis=1)
    assert bootstrap_best_at_k(scores, 4, resamples=100, seed=7) == (pytest.approx(expected.mean()), pytest.approx(expected.std()))


def test_verl_reports_powers_of_two_below_n_and_n_itself():
    assert verl_subset_sizes(8) == [2, 4, 8]
    assert verl_subset_sizes(6) == [2, 4, 6]
    assert verl_subset_sizes(1) == []


def test_a_failed_attempt_counts_as_solved_when_its_retry_succeeds():
    assert with_one_retry([1.0, 0.0, 0.0, None], [None, 1.0, 0.0, 1.0]) == [1.0, 1.0, 0.0, None]


def test_a_problem_with_a_censored_sample_is_left_out_of_every_metric_not_counted_as_failed():
    assert problem_metrics([1.0, None, 0.0, None]) is None
    metrics = problem_metrics([1.0, 0.0, 0.0, 0.0])
    assert metrics["mean@4"] == 0.25 and metrics["pass@1"] == pytest.approx(0.25) and metrics["pass@4"] == 1.0


def outcomes(*rewards, lean_valid=None):
    return [Outcome(reward, reward if lean_valid is None else lean_valid[i]) for i, reward in enumerate(rewards)]


def test_every_k_is_averaged_over_the_same_problems():
    # "c" has a censored sample: it is in no metric, so pass@1, pass@2, best@2 and mean@2 all count a and b.
    first = {"a": outcomes(1.0, 0.0), "b": outcomes(0.0, 0.0), "c": outcomes(1.0, None)}
    report = evaluation_report(first)
    assert report["problems"] == 3 and report["problems_scored"] == 2 and report["censored"] == 1
    assert report["pass@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert report["pass@2"] == pytest.approx((1.0 + 0.0) / 2)
    assert report["mean@2"] == pytest.approx(report["pass@1"])
    assert not any(name.startswith("mean@1") for name in report)


def test_nothing_measured_is_absent_not_zero():
    report = evaluation_report({"a": outcomes(None, None)})
    assert report["problems_scored"] == 0 and "pass@1" not in report and "mean@2" not in report


def test_the_releases_acc_counts_lean_validity_without_the_format_gate():
    # Sample 2 failed our format check (reward 0) but Lean accepts its proof: the release's acc counts it.
    first = {"a": outcomes(1.0, 0.0, lean_valid=[1.0, 1.0]), "b": outcomes(0.0, 0.0, lean_valid=[0.0, None])}
    report = evaluation_report(first)
    assert report["pass@1"] == pytest.approx((0.5 + 0.0) / 2)
    assert report["acc/pass@1"] == pytest.approx(1.0) and report["acc/problems_scored"] == 1
    assert report["acc/censored"] == 1 and report["problems_scored"] == 2


def test_the_report_averages_over_problems_before_and_after_one_retry():
    first = {"a": outcomes(1.0, 0.0, 0.0, 0.0), "b": outcomes(0.0, 0.0, 0.0, 0.0)}
    retries = {"a": [None, *outcomes(1.0, 0.0, 0.0)], "b": outcomes(0.0, 0.0, 0.0, 1.0)}
    report = evaluation_report(first, retries)
    assert report["pass@1"] == pytest.approx((0.25 + 0.0) / 2)
    assert report["pass@4"] == pytest.approx((1.0 + 0.0) / 2)
    assert report["retry/pass@1"] == pytest.approx((0.5 + 0.25) / 2)
    assert report["retry/pass@4"] == pytest.approx(1.0)
    assert report["retry/acc/pass@1"] == report["retry/pass@1"]
    assert report["problems"] == 2
    assert 0.0 <= report["best@2/mean"] <= report["best@4/mean"] <= 1.0
