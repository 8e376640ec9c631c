"""The stand-in's latency can be long-tailed like Lean's: log-normal around a mean, and a share of the proofs
running to the request's timeout (``lean-standin --latency-ms M --latency-sigma S --timeout-share P``)."""

import math
import statistics
import subprocess
import sys

import pytest

from trainer.verification.standin_server import LatencyDistribution
from trainer.verification.verdicts import Verdict


def test_the_draws_have_the_asked_mean_and_a_long_tail():
    latency = LatencyDistribution(mean_s=1.5, sigma=1.0, seed=7)
    draws = [latency.draw() for _ in range(40_000)]
    assert statistics.fmean(draws) == pytest.approx(1.5, rel=0.05)
    assert statistics.median(draws) < 1.0  # exp(mu) = 1.5 / e^0.5 ≈ 0.91: most proofs are quick...
    assert max(draws) > 15  # ...and a few take ten times the mean


def test_the_asked_share_runs_to_the_timeout_and_the_draws_repeat_with_their_seed():
    first = LatencyDistribution(mean_s=0.2, sigma=0.5, timeout_share=0.1, seed=3)
    again = LatencyDistribution(mean_s=0.2, sigma=0.5, timeout_share=0.1, seed=3)
    series = [first.draw() for _ in range(20_000)]
    assert series == [again.draw() for _ in range(20_000)]
    assert sum(math.isinf(d) for d in series) / len(series) == pytest.approx(0.1, abs=0.01)


def test_sigma_zero_is_the_fixed_latency():
    assert {LatencyDistribution(mean_s=0.25).draw() for _ in range(10)} == {0.25}


@pytest.mark.parametrize("settings", [dict(mean_s=-1), dict(sigma=-0.1), dict(timeout_share=1.5)])
def test_a_latency_out_of_bounds_is_refused_saying_which(settings):
    with pytest.raises(ValueError, match="0 or more|between 0 and 1"):
        LatencyDistribution(**settings)


def test_a_proof_drawn_into_the_tail_is_lean_s_timeout_the_proofs_fault(fresh_standin, helpers):
    # Every proof after the probe runs to the 1 s timeout: the verdict is a timeout, never censored.
    [result], _ = helpers.verify(
        fresh_standin.url, [helpers.checked("\n  norm_num")], timeout_s=1.0,
        after_probe=lambda: setattr(fresh_standin.app.settings, "latency", LatencyDistribution(timeout_share=1.0)),
    )
    assert result.verdict is Verdict.TIMEOUT and not result.is_censored


def test_the_command_refuses_a_share_above_one():
    finished = subprocess.run([sys.executable, "-m", "trainer", "lean-standin", "--timeout-share", "2", "--port", "1"],
                              capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "between 0 and 1, got 2.0" in finished.stderr
