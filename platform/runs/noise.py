"""Whether two groups of seeds differ on a metric beyond the seeds' own spread: Welch's t-test.

RL runs on reasoning are noisy (our cpu-demo at learning rate 2e-5 learned on seed 0 and collapsed on seed 1), so
the compare page never lets a colour alone say "B beats A". Each seed contributes one number, its mean over the
chosen window of steps; the two groups' numbers go through Welch's unequal-variance t-test (Welch 1947), whose
two-sided p-value comes from Student's t distribution through the regularized incomplete beta function
(Numerical Recipes, 3rd ed., §6.4 and §14.2). scipy is not in the lock, and this is forty lines.

Pure Python, no Django: tests/runs/test_the_noise_verdict_tells_a_real_difference_from_the_seeds_spread.py pins it
to closed forms and published values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# The conventional threshold; the verdict prints the p-value so a reader can apply their own.
SIGNIFICANCE = 0.05
TEST_NAME = "Welch's t-test"


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (Lentz's method, Numerical Recipes' betacf)."""
    tiny, epsilon = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < epsilon:
            break
    return h


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), for a, b > 0 and 0 ≤ x ≤ 1."""
    if not 0.0 <= x <= 1.0:
        raise ValueError(f"the incomplete beta function takes x in [0, 1], got {x!r}")
    if x in (0.0, 1.0):
        return x
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(log_front)
    # The fraction converges fast on the side of the mean; the symmetry I_x(a,b) = 1 - I_{1-x}(b,a) gives the other.
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, degrees_of_freedom: float) -> float:
    """P(|T| ≥ |t|) for Student's t with ``degrees_of_freedom`` (> 0, not necessarily whole)."""
    if degrees_of_freedom <= 0:
        raise ValueError(f"a t distribution needs degrees of freedom above 0, got {degrees_of_freedom!r}")
    if math.isinf(t):
        return 0.0
    return regularized_incomplete_beta(degrees_of_freedom / 2.0, 0.5, degrees_of_freedom / (degrees_of_freedom + t * t))


@dataclass(frozen=True)
class WelchResult:
    mean_a: float
    mean_b: float
    seeds_a: int
    seeds_b: int
    t: float
    degrees_of_freedom: float
    p_value: float

    @property
    def differs(self) -> bool:
        return self.p_value < SIGNIFICANCE


def mean_and_variance(values: Sequence[float]) -> tuple[float, float]:
    """The mean and the sample variance (n − 1), in floats: statistics.stdev's exact fractions cost the compare
    page half its time at 20 seeds × 500 steps."""
    mean = sum(values) / len(values)
    return mean, sum((value - mean) ** 2 for value in values) / (len(values) - 1)


def welch_t_test(a: Sequence[float], b: Sequence[float]) -> WelchResult:
    """Welch's t-test of two samples (each at least 2 values: one seed has no spread to compare against)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"Welch's t-test needs at least 2 values in each sample (got {len(a)} and {len(b)}): "
                         "launch more seeds")
    mean_a, variance_a = mean_and_variance(a)
    mean_b, variance_b = mean_and_variance(b)
    share_a, share_b = variance_a / len(a), variance_b / len(b)
    spread = share_a + share_b
    if spread == 0:
        # Every seed of both groups gave the same number: the groups are identical or differ with no noise at all.
        same = mean_a == mean_b
        return WelchResult(mean_a, mean_b, len(a), len(b), 0.0 if same else math.copysign(math.inf, mean_b - mean_a),
                           float(len(a) + len(b) - 2), 1.0 if same else 0.0)
    t = (mean_b - mean_a) / math.sqrt(spread)
    # The Welch–Satterthwaite approximation of the degrees of freedom.
    degrees_of_freedom = spread ** 2 / (share_a ** 2 / (len(a) - 1) + share_b ** 2 / (len(b) - 1))
    return WelchResult(mean_a, mean_b, len(a), len(b), t, degrees_of_freedom, t_two_sided_p(t, degrees_of_freedom))


def verdict_text(result: WelchResult | None, *, seeds_a: int, seeds_b: int) -> str:
    """The comparison in words, with the test, its numbers and the seeds behind them: never only a colour."""
    if result is None:
        return (f"Cannot tell a difference from noise: {TEST_NAME} needs at least 2 seeds in each group "
                f"(here {seeds_a} and {seeds_b}); launch another seed from the group's page.")
    numbers = (f"{TEST_NAME} on the window means: t = {result.t:.2f}, df = {result.degrees_of_freedom:.1f}, "
               f"p = {result.p_value:.3g}, {result.seeds_a} vs {result.seeds_b} seeds")
    if result.differs:
        return f"A difference beyond the seeds' spread ({numbers}; p < {SIGNIFICANCE})."
    return f"No difference beyond the seeds' spread ({numbers}; p ≥ {SIGNIFICANCE})."
