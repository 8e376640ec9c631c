"""A step where nothing was counted reports None, which the pages draw as a gap and write as "–"."""

from trainer.loop.driver import _mean


def test_the_mean_of_nothing_is_not_measured_rather_than_zero():
    assert _mean([]) is None  # every rollout a format error: no Lean accuracy, not an accuracy of 0
    assert _mean([None, None]) is None  # every verdict censored
    assert _mean([0.0, 1.0, None]) == 0.5
