"""Evaluation metrics: verl's bootstrap best@k, unbiased pass@k, before and after one retry (and, with
``retry.max_rounds`` > 1, solved within r rounds of correction for r = 1 … N).

Pure functions on per-problem outcome lists, for two scores of each sample: our gated reward
(plain metric names) and the release's ``acc``, Lean validity without the format gate (``acc/…``),
which is what the release's pass@k counts. A score is in [0, 1], or None when the verdict was
censored (verifier outage, server error, stand-in "cannot decide"); ``CENSORED_HANDLING`` says,
in every report, how those are left out so that every k is averaged over the same problems.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy

# verl's defaults in process_validation_metrics.
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 42


def pass_at_k(num_samples: int, num_correct: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1).

    1 - C(n - c, k) / C(n, k): the chance that k of the n samples, drawn without
    replacement, include at least one correct one. Computed as a product, which stays
    exact for large n where the binomials overflow.
    """
    if not 0 <= num_correct <= num_samples:
        raise ValueError(f"need 0 ≤ correct ≤ samples, got correct={num_correct}, samples={num_samples}")
    if not 1 <= k <= num_samples:
        raise ValueError(f"pass@k needs 1 ≤ k ≤ samples, got k={k}, samples={num_samples}; lower k or sample more")
    if num_samples - num_correct < k:
        return 1.0
    failures = numpy.arange(num_samples - num_correct + 1, num_samples + 1)
    return float(1.0 - numpy.prod(1.0 - k / failures))


def bootstrap_best_at_k(
    scores: Sequence[float], k: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float]:
    """verl's ``bootstrap_metric`` with ``np.max``: (mean, std) of the best of k draws with replacement.

    Each of ``resamples`` rounds draws k of the scores with replacement and keeps the
    maximum; the mean over rounds estimates best@k, the std its spread.
    """
    if not scores:
        raise ValueError("best@k needs at least one scored attempt; got none (all censored?)")
    if k < 1:
        raise ValueError(f"best@k needs k ≥ 1, got {k}")
    generator = numpy.random.default_rng(seed)
    values = numpy.asarray(scores, dtype=float)
    draws = generator.integers(0, len(values), size=(resamples, k))  # (resamples, k)
    best = values[draws].max(axis=1)
    return float(best.mean()), float(best.std())


def verl_subset_sizes(num_samples: int) -> list[int]:
    """The k values verl reports for n samples: 2, 4, 8, … below n, then n itself."""
    sizes, k = [], 2
    while k < num_samples:
        sizes.append(k)
        k *= 2
    if num_samples > 1:
        sizes.append(num_samples)
    return sizes


def with_one_retry(first_attempts: Sequence[float | None], retries: Sequence[float | None]) -> list[float | None]:
    """Per attempt: solved within two turns. ``retries[i]`` scores the retry of attempt i.

    A successful first attempt needs no retry; a failed one counts as solved if its retry
    is; a censored first attempt stays censored (it was never known to fail), and a
    censored or missing retry (dropped, too long) leaves the first attempt's score.
    """
    if len(first_attempts) != len(retries):
        raise ValueError(f"one retry slot per first attempt: {len(first_attempts)} attempts, {len(retries)} retries")
    combined: list[float | None] = []
    for first, retry in zip(first_attempts, retries):
        if first is None:
            combined.append(None)
        elif retry is None:
            combined.append(first)
        else:
            combined.append(max(first, retry))
    return combined


def within_rounds(first_attempts: Sequence[float | None], chains: Sequence[Sequence[float | None]],
                  rounds: int) -> list[float | None]:
    """Per attempt: solved within ``rounds`` rounds of correction (``retry.max_rounds``), as Goedel-Prover-V2's
    "with self-correction". ``chains[i]`` scores attempt i's rounds 1, 2, … in order.

    ``with_one_retry`` extended: a chain goes on only from a rejected round, so the best score of the first attempt
    and its first ``rounds`` rounds; a censored first attempt stays censored, and a censored or missing round ends
    the chain where it is (what came before it stands)."""
    if len(first_attempts) != len(chains):
        raise ValueError(f"one chain per first attempt: {len(first_attempts)} attempts, {len(chains)} chains")
    combined: list[float | None] = []
    for first, chain in zip(first_attempts, chains):
        if first is None:
            combined.append(None)
            continue
        best = first
        for outcome in list(chain)[:rounds]:
            if outcome is None:
                break
            best = max(best, outcome)
        combined.append(best)
    return combined


def rounds_report(
    first_attempts: Mapping[str, Sequence[Outcome | None]],
    chains: Mapping[str, Sequence[Sequence[Outcome | None]]],
    max_rounds: int,
) -> dict[str, float]:
    """pass@k, best@k and mean@n of "solved within r rounds of correction" for r = 1 … ``max_rounds``, for both
    families: ``within_{r}_rounds/pass@k`` and ``within_{r}_rounds/acc/pass@k`` (r = 1 equals ``retry/…``; r = 0
    is the plain pass@k). ``chains[pid][i]`` lists the outcomes of sample i's rounds 1, 2, …"""
    report: dict[str, float] = {}
    for prefix, field_name in (("", "reward"), ("acc/", "lean_valid")):
        def value(outcome):
            return None if outcome is None else getattr(outcome, field_name)

        for rounds in range(1, max_rounds + 1):
            solved = {pid: within_rounds([value(o) for o in outcomes],
                                         [[value(o) for o in chain] for chain in chains.get(pid, [[]] * len(outcomes))],
                                         rounds)
                      for pid, outcomes in first_attempts.items()}
            report.update({f"within_{rounds}_rounds/{prefix}{name}": value_
                           for name, value_ in aggregate(solved).items() if math.isfinite(value_)})
    return report


@dataclass(frozen=True)
class Outcome:
    """One evaluation sample, scored two ways (None where that way's verdict was censored).

    ``reward`` is ours: the gated reward (1 only if the format check passed and Lean accepted).
    ``lean_valid`` is the release's ``acc``: 1 when Lean accepted the answer's proof, the format
    check not applied (the release's pass@k counts this).
    """

    reward: float | None
    lean_valid: float | None


# What each family of metric names counts, for every report's readers.
METRIC_FAMILIES = {
    "": "ours: the gated reward (1 only if the format check passed and Lean accepted the proof)",
    "acc/": "the release's acc: Lean accepted the answer's proof, format check not applied",
}
CENSORED_HANDLING = (
    "A censored sample (verifier outage, server error, the stand-in's 'cannot decide') is never counted as a "
    "failure: a problem with any censored first attempt is left out of every metric of that family (every k "
    "is averaged over the same problems: problems_scored, acc/problems_scored); a censored retry leaves its "
    "first attempt's score. A Lean timeout is the proof's fault and scores 0."
)


def problem_metrics(outcomes: Sequence[float | None], success_threshold: float = 1.0) -> dict[str, float] | None:
    """One problem's metrics: mean@n, pass@k and best@k for verl's k values; None (left out) when
    any sample is censored, so every k is averaged over the same problems."""
    if not outcomes or any(score is None for score in outcomes):
        return None
    n = len(outcomes)
    correct = sum(score >= success_threshold for score in outcomes)
    metrics: dict[str, float] = {f"mean@{n}": float(numpy.mean(outcomes))}
    for k in [1, *verl_subset_sizes(n)]:
        metrics[f"pass@{k}"] = pass_at_k(n, correct, k)
    for k in verl_subset_sizes(n):
        metrics[f"best@{k}/mean"], metrics[f"best@{k}/std"] = bootstrap_best_at_k(list(outcomes), k)
    return metrics


def aggregate(per_problem: Mapping[str, Sequence[float | None]]) -> dict[str, float]:
    """Each metric averaged over the problems with no censored sample (verl averages over prompts),
    with how many problems that is and how many samples were censored."""
    scored = {pid: metrics for pid, outcomes in per_problem.items() if (metrics := problem_metrics(outcomes)) is not None}
    collected: dict[str, list[float]] = {}
    for metrics in scored.values():
        for name, value in metrics.items():
            collected.setdefault(name, []).append(value)
    result = {name: float(numpy.mean(values)) for name, values in collected.items()}
    result["problems_scored"] = float(len(scored))
    result["censored"] = float(sum(score is None for outcomes in per_problem.values() for score in outcomes))
    return result


def evaluation_report(
    first_attempts: Mapping[str, Sequence[Outcome | None]],
    retries: Mapping[str, Sequence[Outcome | None]] | None = None,
) -> dict[str, float]:
    """pass@k, best@k and mean@n over problems, for our gated reward (plain names) and the release's
    acc (``acc/…``); with ``retries``, the same after one retry (``retry/…``). See CENSORED_HANDLING."""
    report: dict[str, float] = {"problems": float(len(first_attempts))}
    for prefix, field_name in (("", "reward"), ("acc/", "lean_valid")):
        def values(outcomes):
            return [None if outcome is None else getattr(outcome, field_name) for outcome in outcomes]

        first = {pid: values(outcomes) for pid, outcomes in first_attempts.items()}
        report.update({f"{prefix}{name}": value for name, value in aggregate(first).items()})
        if retries is not None:
            after_retry = {
                pid: with_one_retry(outcomes, values(retries.get(pid, [None] * len(outcomes))))
                for pid, outcomes in first.items()
            }
            report.update({f"retry/{prefix}{name}": value for name, value in aggregate(after_retry).items()})
    # Not measured stays absent: a chart must never draw it as 0.
    return {name: value for name, value in report.items() if math.isfinite(value)}


# A 95% interval over problems: the normal approximation to the mean of per-problem pass@k (the
# problems are the sample; the k draws within a problem are already averaged exactly by pass_at_k).
Z_95 = 1.959963984540054
CURVE = "curve/"


def pass_at_k_curve(per_problem: Mapping[str, Sequence[float | None]], success_threshold: float = 1.0
                    ) -> dict[str, float]:
    """Unbiased pass@k for every k from 1 to the samples per problem, each with a 95% interval over problems.

    Names: ``curve/pass@k``, ``curve/pass@k/ci95_low``, ``curve/pass@k/ci95_high``, and
    ``curve/problems_scored``. Problems with a censored sample are left out (CENSORED_HANDLING); when
    none is left, nothing but ``curve/problems_scored`` = 0 is returned: not measured, never 0.
    A single scored problem has no spread to estimate, so its interval is the whole of [0, 1].
    """
    scored = [list(outcomes) for outcomes in per_problem.values()
              if outcomes and all(score is not None for score in outcomes)]
    result: dict[str, float] = {f"{CURVE}problems_scored": float(len(scored))}
    if not scored:
        return result
    n = min(len(outcomes) for outcomes in scored)
    for k in range(1, n + 1):
        values = numpy.array([pass_at_k(len(outcomes), sum(s >= success_threshold for s in outcomes), k)
                              for outcomes in scored])
        mean = float(values.mean())
        if len(values) > 1:
            half_width = Z_95 * float(values.std(ddof=1)) / math.sqrt(len(values))
            low, high = max(0.0, mean - half_width), min(1.0, mean + half_width)
        else:
            low, high = 0.0, 1.0
        result[f"{CURVE}pass@{k}"] = mean
        result[f"{CURVE}pass@{k}/ci95_low"] = low
        result[f"{CURVE}pass@{k}/ci95_high"] = high
    return result


def evaluation_curves(
    first_attempts: Mapping[str, Sequence[Outcome | None]],
    retries: Mapping[str, Sequence[Outcome | None]] | None = None,
) -> dict[str, float]:
    """``pass_at_k_curve`` for our gated reward and the release's acc (``acc/curve/…``), and with ``retries``
    the same after one retry (``retry/curve/…``, ``retry/acc/curve/…``): the names evaluation_report uses."""
    curves: dict[str, float] = {}
    for prefix, field_name in (("", "reward"), ("acc/", "lean_valid")):
        def values(outcomes):
            return [None if outcome is None else getattr(outcome, field_name) for outcome in outcomes]

        first = {pid: values(outcomes) for pid, outcomes in first_attempts.items()}
        curves.update({f"{prefix}{name}": value for name, value in pass_at_k_curve(first).items()})
        if retries is not None:
            after_retry = {pid: with_one_retry(outcomes, values(retries.get(pid, [None] * len(outcomes))))
                           for pid, outcomes in first.items()}
            curves.update({f"retry/{prefix}{name}": value for name, value in pass_at_k_curve(after_retry).items()})
    return curves
