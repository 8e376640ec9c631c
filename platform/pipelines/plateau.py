"""The plateau rule, one pure function: stop when the benchmark gains fewer than δ problems for two iterations running.

Plateaus are real (STP: the plain loop stalls at 13.2% of Lean Workbook), so each iteration's verdict is stored
and shown, not only the final stop.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PlateauVerdict:
    should_stop: bool
    words: str


def plateau_verdict(solved_per_iteration: list[int | None], *, min_gain: int, max_iterations: int) -> PlateauVerdict:
    """The verdict after the last of ``solved_per_iteration`` (benchmark problems solved, iteration 1 first).

    The first iteration has no gain to measure (no earlier benchmark result): it never counts towards a plateau.
    A benchmark result that was not measured (None: every answer censored) is not a gain of 0 either.
    """
    number = len(solved_per_iteration)
    gains = [None if None in (before, after) else after - before
             for before, after in zip(solved_per_iteration, solved_per_iteration[1:], strict=False)]
    last_two = gains[-2:]
    if len(last_two) == 2 and all(gain is not None and gain < min_gain for gain in last_two):
        return PlateauVerdict(True, f"plateau: gained {last_two[0]} then {last_two[1]} problems, under δ = {min_gain} "
                                    "twice running; stopped")
    if number >= max_iterations:
        return PlateauVerdict(True, f"stopped at the maximum of {max_iterations} iteration(s)")
    if not gains:
        return PlateauVerdict(False, "first iteration: no gain to measure yet; continue")
    gain = gains[-1]
    if gain is None:
        return PlateauVerdict(False, "gain not measured (a benchmark result was censored); continue")
    if gain < min_gain:
        return PlateauVerdict(False, f"gained {gain} problem(s), under δ = {min_gain} (once); continue")
    return PlateauVerdict(False, f"gained {gain} problem(s); continue")
