"""The compare page, read from its URL alone, so that a link reproduces the view a person saw:

    /runs/compare/?runs=3&groups=1&groups=2&metric=reward/mean&band=std&smoothing=0.6&axis=tokens&window=5&seeds=1

``runs`` and ``groups`` are what is compared (a group drawn as its seeds' mean with a band: ``minmax`` or ``std``;
``seeds=1`` draws each seed too); ``smoothing`` is an exponential moving average's factor (0, off, by default);
``axis`` is ``step``, ``time`` or ``tokens``; ``window`` is the steps at the end whose means the noise verdict
compares (runs/noise.py). A value the page cannot use falls back to its default and the page says so.
"""

from __future__ import annotations

from runs import queries, run_groups
from runs.evaluation_results import headline_pass_at_k
from runs.models import Run

MAX_COMPARED = 12  # runs plus groups on one chart: beyond it the lines cannot be told apart
CHOICES_LISTED = 200
DEFAULT_METRIC = "reward/mean"
# Offered first in the metric list, in this order; any other numeric metric the runs measured follows.
LEADING_METRICS = ("reward/mean", "lean/accuracy", "response_length/mean", "format_error_share",
                   "generation/tokens_per_second", "learner/loss")


def _ids(values: list[str]) -> list[int]:
    return list(dict.fromkeys(int(value) for value in values if value.isdigit()))


def read_view(query) -> tuple[dict, list[str]]:
    """The view's settings from the URL, and what was out of range (each said on the page, with what was used)."""
    notes = []
    band = query.get("band", "minmax")
    if band not in run_groups.BANDS:
        notes.append(f"band {band!r} is not one of {', '.join(run_groups.BANDS)}: min–max is shown")
        band = "minmax"
    axis = query.get("axis", "step")
    if axis not in run_groups.AXES:
        notes.append(f"axis {axis!r} is not one of {', '.join(run_groups.AXES)}: steps are shown")
        axis = "step"
    try:
        smoothing = float(query.get("smoothing", "0") or 0)
        if not 0 <= smoothing < 1:
            raise ValueError
    except ValueError:
        notes.append(f"smoothing {query.get('smoothing')!r} is a factor from 0 (off) to below 1: no smoothing is shown")
        smoothing = 0.0
    window_text = query.get("window", str(run_groups.DEFAULT_WINDOW))
    window = int(window_text) if window_text.isdigit() and int(window_text) >= 1 else run_groups.DEFAULT_WINDOW
    if str(window) != window_text:
        notes.append(f"window {window_text!r} is a number of steps, 1 or more: {window} is used")
    return {"runs": _ids(query.getlist("runs")), "groups": _ids(query.getlist("groups")),
            "metric": query.get("metric") or DEFAULT_METRIC, "band": band, "axis": axis, "smoothing": smoothing,
            "window": window, "seeds": query.get("seeds") == "1"}, notes


def _metric_names(runs: list[Run]) -> list[str]:
    names = run_groups.metric_names(runs)
    return [*[name for name in LEADING_METRICS if name in names], *sorted(names - set(LEADING_METRICS))]


def _column_config(runs: list[Run]) -> dict[str, object]:
    """A column's configuration: each field's value where its runs agree, else the values it takes."""
    flats = [{queries.PROMPTSET_SETTING: queries.promptset_version_name(run), **queries.flatten(run.public_config)}
             for run in runs]
    result = {}
    for path in sorted(set().union(*flats)):
        values = list(dict.fromkeys(repr(flat.get(path)) for flat in flats))
        result[path] = flats[0].get(path) if len(values) == 1 else "varies: " + ", ".join(
            str(flat.get(path)) for flat in {repr(flat.get(path)): flat for flat in flats}.values())
    return result


def config_table(columns: list[dict]) -> dict:
    """The configuration fields side by side: ``differing`` rows (the promptset first), and ``every`` row."""
    configs = [_column_config(column["runs"]) for column in columns]
    paths = sorted(set().union(*configs), key=lambda path: (path != queries.PROMPTSET_SETTING, path))
    every = [{"path": path, "values": [config.get(path) for config in configs]} for path in paths]
    differing = [row for row in every if len({repr(value) for value in row["values"]}) > 1
                 or any(isinstance(value, str) and value.startswith("varies: ") for value in row["values"])]
    return {"differing": differing, "every": every}


def evaluation_table(runs: list[Run]) -> dict:
    """pass@k per checkpoint (evaluation step) per run, at the largest k each run measured; each run's best marked."""
    rows, steps = [], set()
    for run in runs:
        points = {}
        for evaluation in run.evaluations.all():
            headline = headline_pass_at_k(evaluation.values)
            if headline is not None and headline["pass_at_k"] is not None:  # not measured is never shown as 0
                points[evaluation.step] = (headline["k"], headline["pass_at_k"])
        best = max(points, key=lambda step: (points[step][1], -step)) if points else None
        steps.update(points)
        rows.append({"run": run, "points": points, "best_step": best})
    ordered = sorted(steps)
    for row in rows:
        row["cells"] = [{"step": step, "k": row["points"][step][0], "value": row["points"][step][1],
                         "is_best": step == row["best_step"]} if step in row["points"] else None for step in ordered]
    return {"steps": ordered, "rows": [row for row in rows if row["points"]]}


def parallel_coordinates(column: dict, metric: str, window: int) -> dict | None:
    """For a grid group: one line per run from each varied field's value to its final ``metric`` (the mean over its
    last ``window`` measured steps). Each axis is scaled to its own range on the page; the values travel as they are."""
    group = column.get("group")
    if group is None or not group.grid:
        return None
    fields = list(group.grid)
    lines = []
    for member in run_groups.members(group, column["runs"]):
        points = column["points"].get(member["run"].pk) or []
        final = sum(value for _, _, value in points[-window:]) / len(points[-window:]) if points else None
        lines.append({"id": member["run"].pk, "name": member["run"].name, "seed": member["seed"],
                      "values": [member["cell"][field] for field in fields], "final": final})
    return {"group": group.name, "axes": [*fields, f"{metric}, last {window} steps"], "lines": lines}


def page(user, query) -> dict:
    view, notes = read_view(query)
    visible = Run.objects.visible_to(user).select_related("promptset_version__promptset")
    groups = {group.pk: group for group in run_groups.visible_groups(user).filter(pk__in=view["groups"])}
    groups = [groups[pk] for pk in view["groups"] if pk in groups]
    found = {run.pk: run for run in visible.filter(pk__in=view["runs"])}
    runs = [found[pk] for pk in view["runs"] if pk in found]
    if len(runs) + len(groups) > MAX_COMPARED:
        notes.append(f"{len(runs) + len(groups)} runs and groups asked for; the first {MAX_COMPARED} are shown")
        groups = groups[:MAX_COMPARED]
        runs = runs[:MAX_COMPARED - len(groups)]
    members = {group.pk: [] for group in groups}
    for run in visible.filter(run_group__in=groups).prefetch_related("evaluations").order_by("pk"):
        members[run.run_group_id].append(run)
    runs = sorted(visible.filter(pk__in=[run.pk for run in runs]).prefetch_related("evaluations"),
                  key=lambda run: view["runs"].index(run.pk))
    columns = ([{"kind": "group", "id": group.pk, "name": group.name, "runs": members[group.pk], "group": group}
                for group in groups if members[group.pk]]
               + [{"kind": "run", "id": run.pk, "name": run.name, "runs": [run]} for run in runs])
    every_run = [run for column in columns for run in column["runs"]]
    for column in columns:
        points = run_groups.run_points(column["runs"], view["metric"], view["axis"], view["smoothing"])
        column["points"] = points
        column["line"] = run_groups.group_line(points, view["band"])
        column["seed_lines"] = [{"id": run.pk, "name": run.name, "points": [[x, value] for _, x, value in points[run.pk]]}
                                for run in column["runs"]] if view["seeds"] and column["kind"] == "group" else []
    group_columns = [column for column in columns if column["kind"] == "group"]
    verdicts = [{"first": group_columns[0], "other": other,
                 **run_groups.noise_verdict(group_columns[0]["points"], other["points"], view["window"])}
                for other in group_columns[1:]]
    chart = [{"kind": column["kind"], "id": column["id"], "name": column["name"], "seeds": len(column["runs"]),
              "line": [[point["x"], point["mean"], point["low"], point["high"]] for point in column["line"]],
              "seedLines": column["seed_lines"]}
             for column in columns]
    grids = [grid for column in group_columns
             if (grid := parallel_coordinates(column, view["metric"], view["window"])) is not None]
    return {
        "view": view, "notes": notes, "columns": columns, "verdicts": verdicts, "grids": grids,
        "metric_names": _metric_names(every_run) or [view["metric"]],
        "axes": run_groups.AXES, "bands": run_groups.BANDS,
        "chart": {"columns": chart, "metric": view["metric"], "axisLabel": run_groups.AXES[view["axis"]],
                  "band": run_groups.BANDS[view["band"]]},
        "config": config_table(columns) if len(columns) > 1 else None,
        "evaluations": evaluation_table(every_run),
        "run_choices": Run.objects.visible_to(user).values("pk", "name")[:CHOICES_LISTED],
        "group_choices": run_groups.visible_groups(user).values("pk", "name")[:CHOICES_LISTED],
    }
