"""What a run group's page, the compare page and the group's export read: each member's cell and seed, and a
metric across a group's seeds as one line with its band.

A group's line at a step is over the seeds that reached that step (a seed still running adds to the mean when it
gets there); a seed that did not measure the metric at a step is left out of that step, never counted as 0. Where
the x axis is wall time or generated tokens, a group's point at step s sits at its seeds' mean x at step s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from statistics import fmean

from runs import noise
from runs.group_launch import cell_text
from runs.launch_contract import SETTABLE_FIELDS
from django.db import connections
from django.db.models import FloatField, Value
from django.db.models.expressions import RawSQL

from runs.models import Run, RunEvent, RunGroup, StepMetrics
from trainer.observability.events import EventType

# The x axes a comparison may use: the name in the URL → its label on the page.
AXES = {"step": "step", "time": "wall time, s (from the run's first metrics)", "tokens": "generated tokens"}
BANDS = {"minmax": "min–max of the seeds", "std": "± one standard deviation"}
DEFAULT_WINDOW = 5  # steps at the end over which each seed's metric is averaged for the noise verdict


def visible_groups(user):
    return RunGroup.objects.filter(owner=user) if user.is_authenticated else RunGroup.objects.none()


def _value_at(config: dict, field: str):
    settable = SETTABLE_FIELDS[field]
    return (config.get(settable.section) or {}).get(settable.field)


def members(group: RunGroup, runs: Iterable[Run] | None = None) -> list[dict]:
    """Each run of the group with its cell (the grid's values, read from the run's own config) and its seed."""
    rows = []
    for run in runs if runs is not None else group.runs.order_by("pk"):
        cell = {field: _value_at(run.config, field) for field in group.grid}
        rows.append({"run": run, "cell": cell, "cell_text": cell_text(cell) or "every run",
                     "seed": _value_at(run.config, "seed")})
    return rows


def cells(group: RunGroup) -> list[dict]:
    """The group's cells in launch order, each with its runs."""
    by_cell: dict[str, dict] = {}
    for row in members(group):
        by_cell.setdefault(row["cell_text"], {"text": row["cell_text"], "cell": row["cell"], "members": []})
        by_cell[row["cell_text"]]["members"].append(row)
    return list(by_cell.values())


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def smoothed(points: list[tuple[float, float]], factor: float) -> list[tuple[float, float]]:
    """An exponential moving average, as W&B's and TensorBoard's smoothing: y'_i = f·y'_{i-1} + (1-f)·y_i, with the
    first point its own value; ``factor`` 0 is no smoothing."""
    result, previous = [], None
    for x, y in points:
        previous = y if previous is None else factor * previous + (1 - factor) * y
        result.append((x, previous))
    return result


def _number_at(key: str) -> RawSQL:
    """A step's metric ``key`` as a float, read by PostgreSQL: null where it is absent or not a number (a count of
    categories, a flag), so it is left out, never read as 0. Decoding it in Python was half the compare page's time."""
    column = f'"{StepMetrics._meta.db_table}"."values"'
    return RawSQL(f"CASE WHEN jsonb_typeof({column} -> %s) = 'number' THEN ({column} ->> %s)::float8 END", (key, key),
                  output_field=FloatField())


def run_points(runs: list[Run], metric: str, axis: str, smoothing: float) -> dict[int, list[tuple[int, float, float]]]:
    """Per run, its (step, x, value) where it measured ``metric``, in step order, smoothed by ``smoothing``.
    Only the figures drawn leave the database: a step's metrics hold some forty, and 20 runs of 500 steps would
    otherwise be 10,000 documents decoded for three numbers each."""
    published = {}
    if axis == "time":
        rows = (RunEvent.objects.filter(run__in=runs, type=EventType.METRICS)
                .values_list("run_id", "payload__step", "published_at").order_by("run_seq"))
        for run_id, step, at in rows:
            published[(run_id, step)] = at
    records: dict[int, list[tuple]] = {run.pk: [] for run in runs}
    # The tokens axis alone needs each step's answers and their mean length: each figure read is the step's whole
    # metrics document decompressed again, so the other axes read one.
    counted = (dict(length=_number_at("response_length/mean"), answers=_number_at("rollouts")) if axis == "tokens"
               else dict(length=Value(None, output_field=FloatField()), answers=Value(None, output_field=FloatField())))
    query = (StepMetrics.objects.filter(run__in=runs).order_by("run_id", "step")
             .annotate(metric=_number_at(metric), **counted)
             .values_list("run_id", "step", "metric", "length", "answers"))
    # Read through a cursor: the ORM's per-value converters were a fifth of the page at 10,000 rows, and PostgreSQL
    # already hands back a finite float8 or null (jsonb holds no NaN or infinity), so each value is used as it comes.
    sql, params = query.query.sql_with_params()
    with connections[query.db].cursor() as cursor:
        cursor.execute(sql, params)
        for run_id, *record in cursor.fetchall():
            records[run_id].append(record)
    result = {}
    for run in runs:
        first = next((published[(run.pk, step)] for step, *_ in records[run.pk] if (run.pk, step) in published), None)
        tokens, points = 0.0, []
        for step, value, length, answers in records[run.pk]:
            tokens += length * answers if length is not None and answers is not None else 0.0
            if value is None:
                continue
            if axis == "time":
                at = published.get((run.pk, step))
                if at is None or first is None:
                    continue  # its metrics event is gone: no time to place it at, so not drawn rather than guessed
                x = (at - first).total_seconds()
            else:
                x = tokens if axis == "tokens" else float(step)
            points.append((step, x, value))
        if smoothing:
            smooth = smoothed([(x, value) for _, x, value in points], smoothing)
            points = [(step, x, value) for (step, _, _), (x, value) in zip(points, smooth, strict=True)]
        result[run.pk] = points
    return result


def metric_names(runs: list[Run]) -> set[str]:
    """The numeric metrics the runs measure, read from each run's latest step (every step publishes the same names)."""
    latest = StepMetrics.objects.filter(run__in=runs).order_by("run_id", "-step").distinct("run_id")
    return {name for record in latest for name, value in record.values.items() if _number(value) is not None}


def group_line(points_by_run: dict[int, list[tuple[int, float, float]]], band: str) -> list[dict]:
    """Per step any seed measured: x (the seeds' mean), the seeds' mean, the band's low and high, and the count."""
    by_step: dict[int, list[tuple[float, float]]] = {}
    for points in points_by_run.values():
        for step, x, value in points:
            by_step.setdefault(step, []).append((x, value))
    line = []
    for step in sorted(by_step):
        xs, values = zip(*by_step[step], strict=True)
        if band == "std":
            mean, variance = noise.mean_and_variance(values) if len(values) > 1 else (values[0], 0.0)
            spread = math.sqrt(variance)
            low, high = mean - spread, mean + spread
        else:
            mean, low, high = fmean(values), min(values), max(values)
        line.append({"step": step, "x": fmean(xs), "mean": mean, "low": low, "high": high, "seeds": len(values)})
    return line


def window_means(points_by_run: dict[int, list[tuple[int, float, float]]], last_step: int, window: int) -> list[float]:
    """Each seed's mean of the metric over steps last_step-window+1 … last_step (seeds with no value there: left out)."""
    means = []
    for points in points_by_run.values():
        inside = [value for step, _, value in points if last_step - window < step <= last_step]
        if inside:
            means.append(fmean(inside))
    return means


def noise_verdict(first: dict[int, list], other: dict[int, list], window: int) -> dict:
    """Whether ``other`` differs from ``first`` beyond their seeds' spread, over the last ``window`` steps both
    groups' every seed reached: each seed's window mean, then Welch's t-test (runs/noise.py)."""
    ends = [points[-1][0] for points in (*first.values(), *other.values()) if points]
    if not ends:
        return {"text": "Cannot tell a difference from noise: no seed has measured this metric yet.", "differs": None}
    last_step = min(ends)
    a, b = window_means(first, last_step, window), window_means(other, last_step, window)
    result = noise.welch_t_test(a, b) if len(a) >= 2 and len(b) >= 2 else None
    steps = f"steps {max(last_step - window + 1, 0)}–{last_step}"
    return {"text": f"{steps}: " + noise.verdict_text(result, seeds_a=len(a), seeds_b=len(b)),
            "differs": None if result is None else result.differs, "last_step": last_step,
            "p_value": None if result is None else result.p_value}
