"""The plateau rule (pipelines/plateau.py): stop when the benchmark gains fewer than δ problems for two iterations
running, or at the maximum; the first iteration's gain is not measured, and a censored result is no gain of 0."""

from pipelines.plateau import plateau_verdict


def test_two_gains_under_delta_running_stop_the_pipeline():
    verdict = plateau_verdict([3, 4, 4], min_gain=2, max_iterations=10)
    assert verdict.should_stop and "plateau" in verdict.words and "1 then 0" in verdict.words


def test_one_small_gain_between_large_ones_does_not_stop_it():
    assert not plateau_verdict([3, 4, 9], min_gain=2, max_iterations=10).should_stop
    assert not plateau_verdict([3, 9, 10], min_gain=2, max_iterations=10).should_stop


def test_the_first_iteration_has_no_gain_to_measure():
    verdict = plateau_verdict([0], min_gain=5, max_iterations=10)
    assert not verdict.should_stop and "no gain to measure" in verdict.words


def test_a_censored_benchmark_result_is_not_a_gain_of_zero():
    verdict = plateau_verdict([3, None, 3], min_gain=1, max_iterations=10)
    assert not verdict.should_stop and "not measured" in verdict.words


def test_the_maximum_of_iterations_stops_it():
    verdict = plateau_verdict([1, 5], min_gain=1, max_iterations=2)
    assert verdict.should_stop and "maximum of 2" in verdict.words
