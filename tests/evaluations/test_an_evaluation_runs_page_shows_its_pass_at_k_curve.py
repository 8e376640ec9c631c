"""An evaluation run's page draws its pass@k curve with the 95% band, lists each k, and shows its samples in
the proof viewer; a run whose every verdict was censored says "not measured" instead of drawing zeros."""

import pytest

from runs.models import Evaluation, Run
from tests.evaluations.leaderboard_cast import evaluation_values

pytestmark = pytest.mark.django_db


@pytest.fixture
def evaluation_run(alice, promptset_version):
    return Run.objects.create(owner=alice, name="eval", kind="eval", promptset_version=promptset_version,
                              preset="cpu-smoke", config={"schedule": {"eval_samples": 2}}, state="succeeded")


def test_the_page_draws_each_measured_family_and_lists_every_k(alices_client, evaluation_run):
    Evaluation.objects.create(run=evaluation_run, step=0, values=evaluation_values(
        {"a": [1.0, 0.0], "b": [0.0, 0.0]}, standin=True))
    page = alices_client.get(f"/runs/{evaluation_run.pk}/")
    html = page.content.decode()
    assert page.status_code == 200 and 'id="pass-at-k"' in html
    assert html.count("<polyline") == 2  # ours and the release's acc; no error-correction curve was made
    assert page.context["pass_at_k_chart"]["max_k"] == 2
    assert "0.2500" in html and "0.5000" in html  # pass@1 and pass@2
    assert 'id="rollouts"' in html  # the samples' viewer


def test_every_verdict_censored_reads_not_measured_and_draws_nothing(alices_client, evaluation_run):
    Evaluation.objects.create(run=evaluation_run, step=0, values=evaluation_values(
        {"a": [None, None]}, standin=True))
    html = alices_client.get(f"/runs/{evaluation_run.pk}/").content.decode()
    assert "<polyline" not in html and "not measured" in html
