"""A run's metrics as files to take away: the JSON the run page's charts read (``GET /api/runs/<id>/series``,
queries.metric_series) and the same records as CSV, for a spreadsheet or pandas.

The CSV is one row per record: each step's metrics (``record`` = ``step``) and each evaluation (``evaluation``),
one column per metric name any record carries, nested values flattened to dotted names as the configuration is.
A metric a record does not carry is an empty cell: not measured, never 0.
"""

from __future__ import annotations

import csv
import io

from runs.queries import flatten, metric_series

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
    columns, rows = metrics_table(metric_series(run))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, restval="", lineterminator="\n")
    writer.writeheader()
    writer.writerows({name: _cell(value) for name, value in row.items()} for row in rows)
    return out.getvalue()


def _cell(value) -> str:
    if value is None:
        return ""  # not measured: an empty cell, which a spreadsheet and pandas read as missing, never 0
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ";".join(_cell(item) for item in value)
    return str(value)
