"""A run's pass@k curve, as GET /api/runs/<id> and the run page report it, read from its latest evaluation.

The trainer names the values (trainer/evaluation.py: ``curve/pass@k`` and its ``/ci95_low``,
``/ci95_high``, per family); this module only groups them. A family with no problem scored (every
verdict censored) is "not measured", never a curve of zeros.
"""

from __future__ import annotations

import re

from trainer.evaluation import CURVE

# Family prefix in the trainer's names → what the report calls it.
FAMILIES = {
    "": "pass_at_k",  # ours: the gated reward
    "acc/": "acc_pass_at_k",  # the release's acc (Lean validity, no format gate): what papers' pass@k counts
    "retry/": "pass_at_k_with_error_correction",
    "retry/acc/": "acc_pass_at_k_with_error_correction",
}
NOT_MEASURED = "not measured: every verdict was censored (the stand-in's 'cannot decide', a Lean outage), so no problem was scored"


def curve_of(values: dict, prefix: str) -> dict | None:
    """One family's curve from an evaluation's values; None where the evaluation did not compute it."""
    scored = values.get(f"{prefix}{CURVE}problems_scored")
    if scored is None:
        return None
    pattern = re.compile(rf"^{re.escape(prefix + CURVE)}pass@(\d+)$")
    points = []
    for name, value in values.items():
        match = pattern.match(name)
        if match:
            k = int(match[1])
            points.append({"k": k, "pass_at_k": value,
                           "ci95_low": values.get(f"{name}/ci95_low"), "ci95_high": values.get(f"{name}/ci95_high")})
    points.sort(key=lambda point: point["k"])
    is_measured = scored > 0 and bool(points)
    return {"problems_scored": int(scored), "is_measured": is_measured, "curve": points,
            "note": "" if is_measured else NOT_MEASURED}


def evaluation_report(step: int, values: dict) -> dict:
    families = {name: curve for prefix, name in FAMILIES.items() if (curve := curve_of(values, prefix)) is not None}
    return {"step": step, "problems": int(values.get("problems", 0)), "censored": int(values.get("censored", 0)),
            "with_error_correction": "pass_at_k_with_error_correction" in families,
            # Verdicts this run did not ask Lean for: its own cache's and, of those, other runs' (shared_cache.py).
            "verdict_cache_hit_rate": values.get("verifier/cache_hit_rate"),
            "shared_verdict_cache_hit_rate": values.get("verifier/shared_cache_hit_rate"), **families}


def latest_evaluation_report(run) -> dict | None:
    evaluation = run.evaluations.order_by("-step").first()
    return None if evaluation is None else evaluation_report(evaluation.step, evaluation.values)
