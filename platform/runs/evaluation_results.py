"""A run's pass@k curve, as GET /api/runs/<id> and the run page report it, read from its latest evaluation.

The trainer names the values (trainer/loop/evaluation.py: ``curve/pass@k`` and its ``/ci95_low``,
``/ci95_high``, per family); this module only groups them. A family with no problem scored (every
verdict censored) is "not measured", never a curve of zeros.
"""

from __future__ import annotations

import re

from trainer.loop.evaluation import CURVE

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


def headline_point(curve: dict) -> dict | None:
    """The point an evaluation is quoted by, on the runs list and the leaderboard alike: pass@k at the largest k it
    computed (the curve's last point); None where no point was kept."""
    return curve["curve"][-1] if curve["curve"] else None


def headline_pass_at_k(values: dict) -> dict | None:
    """An evaluation in one figure, for a line of the runs list: its pass@k (the gated reward's) at the largest k it
    computed, as ``{"k": 32, "pass_at_k": 0.41}``; where nothing was scored, ``pass_at_k`` is None (not measured,
    never 0) and so is ``k`` if no point was kept; None where the evaluation computed no curve."""
    curve = curve_of(values, "")
    if curve is None:
        return None
    top = headline_point(curve)
    if not curve["is_measured"]:
        return {"k": top["k"] if top else None, "pass_at_k": None}
    return {"k": top["k"], "pass_at_k": top["pass_at_k"]}


def latest_evaluation_report(run) -> dict | None:
    """The run's latest evaluation, with the problems it did not attempt and why (shown beside its pass@k)."""
    evaluation = run.evaluations.order_by("-step").first()
    if evaluation is None:
        return None
    return {**evaluation_report(evaluation.step, evaluation.values), "not_attempted": evaluation.not_attempted}


# The run page's pass@k chart, drawn on the server as SVG (the run page's scripts draw per-step series;
# this one is a single curve over k). Coordinates of a WIDTH × HEIGHT box, with a margin for the axes.
WIDTH, HEIGHT, MARGIN = 480, 240, 36
CHART_FAMILIES = (("pass_at_k", "pass@k (gated reward)", "#1f77b4"),
                  ("acc_pass_at_k", "acc pass@k (the release's)", "#2ca02c"),
                  ("pass_at_k_with_error_correction", "pass@k with error correction", "#d62728"))


def curve_chart(report: dict | None) -> dict | None:
    """Per measured family: its polyline, its 95% band as a polygon, and its points; None with nothing measured."""
    if not report:
        return None
    lines = []
    max_k = max((point["k"] for name, _, _ in CHART_FAMILIES if (report.get(name) or {}).get("is_measured")
                 for point in report[name]["curve"]), default=0)
    if max_k == 0:
        return None

    def x(k):
        return MARGIN + (WIDTH - 2 * MARGIN) * ((k - 1) / (max_k - 1) if max_k > 1 else 0.5)

    def y(value):
        return HEIGHT - MARGIN - (HEIGHT - 2 * MARGIN) * value

    for name, label, color in CHART_FAMILIES:
        family = report.get(name) or {}
        if not family.get("is_measured"):
            continue
        points = family["curve"]
        line = " ".join(f"{x(p['k']):.1f},{y(p['pass_at_k']):.1f}" for p in points)
        band = " ".join([f"{x(p['k']):.1f},{y(p['ci95_high']):.1f}" for p in points]
                        + [f"{x(p['k']):.1f},{y(p['ci95_low']):.1f}" for p in reversed(points)])
        lines.append({"name": name, "label": label, "color": color, "line": line, "band": band,
                      "points": [{"k": p["k"], "x": round(x(p["k"]), 1), "y": round(y(p["pass_at_k"]), 1),
                                  "value": p["pass_at_k"], "low": p["ci95_low"], "high": p["ci95_high"]}
                                 for p in points]})
    return {"width": WIDTH, "height": HEIGHT, "lines": lines, "max_k": max_k,
            "x_axis_y": HEIGHT - MARGIN, "y_axis_x": MARGIN, "top": MARGIN, "right": WIDTH - MARGIN}
