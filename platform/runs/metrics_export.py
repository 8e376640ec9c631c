"""A run's metrics as files to take away: the JSON the run page's charts read (``GET /api/runs/<id>/series``,
queries.metric_series) and the same records as CSV, for a spreadsheet or pandas.

The CSV is one row per record: each step's metrics (``record`` = ``step``) and each evaluation (``evaluation``),
one column per metric name any record carries, nested values flattened to dotted names as the configuration is.
A run group's export (CSV or Parquet) is its members' tables in one, each row naming its run, seed and grid cell.
A metric a record does not carry is an empty cell: not measured, never 0.
"""

from __future__ import annotations

import csv
import io
import json

from runs.queries import flatten, metric_series
from runs.run_groups import members

RECORD_COLUMNS = ("record", "step", "attempt")


def metrics_table(series: dict) -> tuple[list[str], list[dict]]:
    """``metric_series``'s records as one table: its columns (the record's own, then metric names in order) and its
    rows, each a dict of the cells it has."""
    rows = [{"record": "step", "step": record["step"], "attempt": record.get("attempt"), **flatten(record["values"])}
            for record in series["metrics"]]
    rows += [{"record": "evaluation", "step": record["step"], **flatten(record["values"])}
             for record in series["evaluations"]]
    metric_names = sorted({name for row in rows for name in row} - set(RECORD_COLUMNS))
    return [*RECORD_COLUMNS, *metric_names], rows


def metrics_csv(run) -> str:
    return _csv(*metrics_table(metric_series(run)))


def _cell(value) -> str:
    if value is None:
        return ""  # not measured: an empty cell, which a spreadsheet and pandas read as missing, never 0
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ";".join(_cell(item) for item in value)
    return str(value)


# A group's metrics: every member's records in one table, each row saying which run, seed and cell it is.
GROUP_COLUMNS = ("run_id", "run_name", "seed")


def group_metrics_table(group) -> tuple[list[str], list[dict]]:
    columns, rows = list(RECORD_COLUMNS), []
    metric_names: set[str] = set()
    for member in members(group):
        run_columns, run_rows = metrics_table(metric_series(member["run"]))
        metric_names.update(run_columns[len(RECORD_COLUMNS):])
        identity = {"run_id": member["run"].pk, "run_name": member["run"].name, "seed": member["seed"],
                    **{f"grid.{name}": value for name, value in member["cell"].items()}}
        rows += [{**identity, **row} for row in run_rows]
    grid_columns = [f"grid.{name}" for name in group.grid]
    return [*GROUP_COLUMNS, *grid_columns, *columns, *sorted(metric_names)], rows


def group_metrics_csv(group) -> str:
    return _csv(*group_metrics_table(group))


def group_metrics_parquet(group, destination) -> None:
    """The CSV's table as Parquet: a column of numbers is float64 (ids, steps and seeds int64), any other a string
    (a list or object as JSON); a missing cell is null, never 0."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns, rows = group_metrics_table(group)
    whole = {"run_id", "seed", "step", "attempt"}
    arrays = []
    for name in columns:
        cells = [row.get(name) for row in rows]
        numbers = all(cell is None or (isinstance(cell, int | float) and not isinstance(cell, bool)) for cell in cells)
        if numbers:
            arrays.append(pa.array(cells, type=pa.int64() if name in whole else pa.float64()))
        else:
            arrays.append(pa.array([None if cell is None else cell if isinstance(cell, str) else json.dumps(cell)
                                    for cell in cells], type=pa.string()))
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), destination)


def _csv(columns: list[str], rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({name: _cell(value) for name, value in row.items()} for row in rows)
    return out.getvalue()
