"""GET /api/runs/<id> reports the latest evaluation's pass@k curve; every verdict censored reads "not measured"."""

import pytest

from runs.models import Evaluation, Run
from trainer.loop.evaluation import Outcome, evaluation_curves, evaluation_report

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation_run(alice, promptset_version):
    return Run.objects.create(owner=alice, name="eval", kind="eval", promptset_version=promptset_version,
                              preset="cpu-smoke", config={})


def values_of(first, retries=None):
    return {**evaluation_report(first, retries), **evaluation_curves(first, retries)}


def test_the_api_reports_each_k_with_its_interval(alices_client, evaluation_run):
    first = {"a": [Outcome(1.0, 1.0), Outcome(0.0, 0.0)], "b": [Outcome(0.0, 1.0), Outcome(0.0, 0.0)]}
    Evaluation.objects.create(run=evaluation_run, step=0, values=values_of(first))
    report = alices_client.get(f"/api/runs/{evaluation_run.pk}").json()["evaluation"]
    assert report["with_error_correction"] is False and "pass_at_k_with_error_correction" not in report
    assert [point["k"] for point in report["pass_at_k"]["curve"]] == [1, 2]
    assert report["pass_at_k"]["curve"][0]["pass_at_k"] == pytest.approx(0.25)
    assert report["acc_pass_at_k"]["curve"][1]["pass_at_k"] == pytest.approx(1.0)


def test_a_benchmark_where_every_verdict_was_censored_reports_not_measured_never_zero(alices_client, evaluation_run):
    first = {"a": [None, None], "b": [Outcome(None, None), None]}
    Evaluation.objects.create(run=evaluation_run, step=0, values=values_of(first))
    report = alices_client.get(f"/api/runs/{evaluation_run.pk}").json()["evaluation"]
    for family in ("pass_at_k", "acc_pass_at_k"):
        assert report[family]["is_measured"] is False and report[family]["curve"] == []
        assert report[family]["note"].startswith("not measured")


def test_a_run_without_an_evaluation_reports_none(alices_client, evaluation_run):
    assert alices_client.get(f"/api/runs/{evaluation_run.pk}").json()["evaluation"] is None
