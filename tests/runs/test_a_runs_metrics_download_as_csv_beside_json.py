"""A run's metrics download as CSV beside the JSON the charts read: the same records, one row each (every step's
metrics, every evaluation), one column per metric; a metric a record lacks is an empty cell, never 0."""

import csv
import io

import pytest

from runs.models import Evaluation, StepMetrics

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_with_metrics(make_run):
    run = make_run(state="running")
    StepMetrics.objects.create(run=run, step=1, values={"reward/mean": 0.25, "time/phases": {"generation": 2.5}})
    StepMetrics.objects.create(run=run, step=2, values={"reward/mean": 0.5, "lean/accuracy": 1})
    Evaluation.objects.create(run=run, step=2, values={"curve/pass@1": 0.75})
    return run


def read_csv(response) -> list[dict]:
    return list(csv.DictReader(io.StringIO(response.content.decode())))


def test_the_csv_holds_the_records_of_the_json(alices_client, run_with_metrics):
    series = alices_client.get(f"/api/runs/{run_with_metrics.pk}/series").json()
    response = alices_client.get(f"/api/runs/{run_with_metrics.pk}/metrics.csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    assert f'filename="run-{run_with_metrics.pk}-metrics.csv"' in response["Content-Disposition"]
    rows = read_csv(response)
    assert [(row["record"], int(row["step"])) for row in rows] == (
        [("step", m["step"]) for m in series["metrics"]] + [("evaluation", e["step"]) for e in series["evaluations"]])
    assert list(rows[0]) == ["record", "step", "attempt", "curve/pass@1", "lean/accuracy", "reward/mean",
                             "time/phases.generation"]
    assert float(rows[0]["reward/mean"]) == 0.25 and float(rows[0]["time/phases.generation"]) == 2.5
    assert float(rows[2]["curve/pass@1"]) == 0.75


def test_a_metric_a_step_did_not_measure_is_an_empty_cell_not_zero(alices_client, run_with_metrics):
    first_step = read_csv(alices_client.get(f"/api/runs/{run_with_metrics.pk}/metrics.csv"))[0]
    assert first_step["lean/accuracy"] == ""


def test_the_run_page_offers_both_downloads(alices_client, run_with_metrics):
    html = alices_client.get(run_with_metrics.get_absolute_url()).content.decode()
    assert f'href="/api/runs/{run_with_metrics.pk}/series"' in html
    assert f'href="/api/runs/{run_with_metrics.pk}/metrics.csv"' in html


def test_a_stranger_gets_neither(client, charlie, run_with_metrics):
    client.force_login(charlie)
    assert client.get(f"/api/runs/{run_with_metrics.pk}/metrics.csv").status_code == 404
