"""The compare page's noise verdict (runs/noise.py): Welch's t-test by hand, pinned to closed forms, printed tables
and a published example, then on made-up seeds where the answer is known."""

import math

import pytest

from runs.noise import regularized_incomplete_beta, t_two_sided_p, verdict_text, welch_t_test


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5, 12.0])
def test_the_p_value_at_one_degree_of_freedom_is_the_cauchy_distributions(t):
    assert t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-10)


@pytest.mark.parametrize("t", [0.3, 1.0, 2.0, 9.0])
def test_the_p_value_at_two_degrees_of_freedom_has_its_closed_form(t):
    assert t_two_sided_p(t, 2) == pytest.approx(1 - t / math.sqrt(t * t + 2), rel=1e-10)


@pytest.mark.parametrize(("t", "degrees_of_freedom"), [(12.706, 1), (2.228, 10), (2.042, 30), (1.960, 1e6)])
def test_the_printed_tables_two_sided_five_percent_points_give_five_percent(t, degrees_of_freedom):
    assert t_two_sided_p(t, degrees_of_freedom) == pytest.approx(0.05, abs=2e-4)


def test_the_incomplete_beta_function_is_symmetric_and_exact_on_a_uniform():
    assert regularized_incomplete_beta(1, 1, 0.3) == pytest.approx(0.3)
    assert regularized_incomplete_beta(2.5, 4, 0.2) == pytest.approx(1 - regularized_incomplete_beta(4, 2.5, 0.8))


def test_wikipedias_welch_example_gives_its_published_t_degrees_and_p():
    # en.wikipedia.org/wiki/Welch%27s_t-test, "Examples", third pair: t ≈ -2.46, ν ≈ 25, p ≈ 0.021.
    a = [27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4]
    b = [27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4]
    result = welch_t_test(b, a)
    assert result.t == pytest.approx(-2.46, abs=0.005)
    assert result.degrees_of_freedom == pytest.approx(25.0, abs=0.1)
    assert result.p_value == pytest.approx(0.021, abs=0.001)


def test_identical_groups_show_no_difference():
    seeds = [0.41, 0.55, 0.48]
    result = welch_t_test(seeds, list(seeds))
    assert result.p_value == pytest.approx(1.0)
    assert not result.differs
    assert verdict_text(result, seeds_a=3, seeds_b=3).startswith("No difference beyond the seeds' spread")


def test_groups_far_apart_show_a_difference_and_say_the_test_and_the_seeds():
    result = welch_t_test([0.10, 0.12, 0.11], [0.80, 0.82, 0.79])
    assert result.differs and result.p_value < 1e-4
    text = verdict_text(result, seeds_a=3, seeds_b=3)
    assert text.startswith("A difference beyond the seeds' spread")
    assert "Welch's t-test" in text and "3 vs 3 seeds" in text


def test_a_gap_smaller_than_the_seeds_spread_is_not_called_a_difference():
    assert not welch_t_test([0.2, 0.6, 0.4], [0.3, 0.7, 0.5]).differs


def test_seeds_without_any_spread_still_get_a_verdict():
    assert welch_t_test([0.5, 0.5], [0.5, 0.5]).p_value == 1.0
    assert welch_t_test([0.5, 0.5], [0.7, 0.7]).differs


def test_one_seed_cannot_be_compared_and_the_page_says_why():
    with pytest.raises(ValueError, match="at least 2 values in each sample"):
        welch_t_test([0.5], [0.4, 0.6])
    assert "needs at least 2 seeds in each group (here 1 and 3)" in verdict_text(None, seeds_a=1, seeds_b=3)
