"""Evaluation metrics: verl's bootstrap best@k, unbiased pass@k, before and after one retry.

Pure functions on per-problem outcome lists. An outcome is a reward in [0, 1], or None
when the verdict was censored (timeout, verifier outage, stand-in "cannot decide"):
censored attempts are left out, as if never sampled, never counted as failures.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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


def problem_metrics(outcomes: Sequence[float | None], success_threshold: float = 1.0) -> dict[str, float]:
    """One problem's metrics over its scored attempts: mean@n, pass@k and best@k for verl's k values."""
    scored = [score for score in outcomes if score is not None]
    metrics: dict[str, float] = {"censored": float(len(outcomes) - len(scored))}
    if not scored:
        return metrics
    n = len(scored)
    correct = sum(score >= success_threshold for score in scored)
    metrics[f"mean@{n}"] = float(numpy.mean(scored))
    for k in [1, *verl_subset_sizes(n)]:
        metrics[f"pass@{k}"] = pass_at_k(n, correct, k)
    for k in verl_subset_sizes(n):
        metrics[f"best@{k}/mean"], metrics[f"best@{k}/std"] = bootstrap_best_at_k(scored, k)
    return metrics


def aggregate(per_problem: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each metric averaged over the problems that have it (verl averages over prompts)."""
    collected: dict[str, list[float]] = {}
    for metrics in per_problem.values():
        for name, value in metrics.items():
            collected.setdefault(name, []).append(value)
    result = {name: float(numpy.mean(values)) for name, values in collected.items() if name != "censored"}
    result["censored"] = float(sum(collected.get("censored", [])))
    result["problems"] = float(len(per_problem))
    result["problems_scored"] = float(sum(1 for m in per_problem.values() if any(k.startswith("mean@") for k in m)))
    return result


def evaluation_report(
    first_attempts: Mapping[str, Sequence[float | None]],
    retries: Mapping[str, Sequence[float | None]] | None = None,
) -> dict[str, float]:
    """best@k and pass@k over problems, and, when ``retries`` is given, the same after one retry (``retry/…``)."""
    report = aggregate({pid: problem_metrics(outcomes) for pid, outcomes in first_attempts.items()})
    if retries is not None:
        after_retry = {
            pid: problem_metrics(with_one_retry(outcomes, retries.get(pid, [None] * len(outcomes))))
            for pid, outcomes in first_attempts.items()
        }
        report.update({f"retry/{name}": value for name, value in aggregate(after_retry).items()})
    return {name: (value if math.isfinite(value) else 0.0) for name, value in report.items()}
