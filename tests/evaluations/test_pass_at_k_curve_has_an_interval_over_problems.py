"""The pass@k curve of an evaluation: every k up to the samples, a 95% interval over problems, and
"not measured" (no value at all) where every verdict was censored; on hand-made numbers."""

from __future__ import annotations

import math

import pytest

from trainer.loop.evaluation import Outcome, evaluation_curves, pass_at_k_curve

Z = 1.959963984540054


def test_every_k_up_to_the_samples_has_the_mean_over_problems_and_a_normal_95_percent_interval():
    curve = pass_at_k_curve({"a": [1.0, 0.0], "b": [0.0, 0.0]})
    assert curve["curve/problems_scored"] == 2
    # pass@1: a 0.5, b 0 → mean 0.25; sample std 0.3536 over 2 problems → half-width 1.96·0.3536/√2
    assert curve["curve/pass@1"] == pytest.approx(0.25)
    half = Z * math.sqrt(0.125) / math.sqrt(2)
    assert curve["curve/pass@1/ci95_low"] == pytest.approx(max(0.0, 0.25 - half))
    assert curve["curve/pass@1/ci95_high"] == pytest.approx(0.25 + half)
    # pass@2: a 1, b 0 → 0.5, the interval clipped to [0, 1]
    assert curve["curve/pass@2"] == pytest.approx(0.5)
    assert (curve["curve/pass@2/ci95_low"], curve["curve/pass@2/ci95_high"]) == (0.0, 1.0)
    assert "curve/pass@3" not in curve


def test_identical_problems_have_an_interval_of_no_width():
    curve = pass_at_k_curve({"a": [1.0, 0.0, 0.0, 0.0], "b": [0.0, 1.0, 0.0, 0.0]})
    assert curve["curve/pass@1"] == curve["curve/pass@1/ci95_low"] == curve["curve/pass@1/ci95_high"] == 0.25


def test_a_problem_with_a_censored_sample_is_left_out_of_every_k():
    curve = pass_at_k_curve({"a": [1.0, 1.0], "b": [None, 0.0]})
    assert curve["curve/problems_scored"] == 1
    assert curve["curve/pass@1"] == 1.0
    assert (curve["curve/pass@1/ci95_low"], curve["curve/pass@1/ci95_high"]) == (0.0, 1.0)  # one problem: no spread


def test_every_verdict_censored_is_not_measured_never_zero():
    assert pass_at_k_curve({"a": [None, None], "b": [None, None]}) == {"curve/problems_scored": 0.0}


def test_error_correction_adds_the_curve_after_one_retry_for_both_scores():
    first = {"a": [Outcome(0.0, 0.0), Outcome(1.0, 1.0)]}
    retries = {"a": [Outcome(1.0, 1.0), None]}
    curves = evaluation_curves(first, retries)
    assert curves["curve/pass@1"] == 0.5 and curves["retry/curve/pass@1"] == 1.0
    assert curves["acc/curve/pass@1"] == 0.5 and curves["retry/acc/curve/pass@1"] == 1.0
    assert not any(name.startswith("retry/") for name in evaluation_curves(first, None))
