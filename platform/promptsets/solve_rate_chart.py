"""The problem page's chart of a statement's solve rate, run by run and step by step, drawn on the server as SVG.

No script: the numbers are the same ones the page's table and its API give (proofs/history.py's series), placed on
a fixed 0-to-1 scale, and the SVG scales to the screen (viewBox). Each point's title says its count in words.
"""

from __future__ import annotations

# A 400-unit-wide drawing: on a 390 px phone its 13-unit labels stay about 12 px high.
WIDTH, HEIGHT, MARGIN = 400, 200, 36
# Distinguishable on white and for common colour blindness (Okabe–Ito); a sixth run reuses the first colour.
COLOURS = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00")


def solve_rate_chart(series: list[dict]) -> dict | None:
    """Polylines and points in the SVG's coordinates, one line per run; None when nothing was scored."""
    steps = [point["step"] for run in series for point in run["points"]]
    if not steps:
        return None
    first, last = min(steps), max(steps)
    span = max(1, last - first)

    def x(step: int) -> float:
        return round(MARGIN + (step - first) / span * (WIDTH - 2 * MARGIN), 1)

    def y(rate: float) -> float:
        return round(HEIGHT - MARGIN - rate * (HEIGHT - 2 * MARGIN), 1)

    lines = []
    for index, run in enumerate(series):
        points = [{**point, "x": x(point["step"]), "y": y(point["solve_rate"])} for point in run["points"]]
        lines.append({"run_id": run["run_id"], "run_name": run["run_name"], "colour": COLOURS[index % len(COLOURS)],
                      "points": points, "polyline": " ".join(f"{p['x']},{p['y']}" for p in points)})
    return {"width": WIDTH, "height": HEIGHT, "left": MARGIN, "right": WIDTH - MARGIN, "top": y(1.0), "bottom": y(0.0),
            "middle": y(0.5), "first_step": first, "last_step": last, "lines": lines}
