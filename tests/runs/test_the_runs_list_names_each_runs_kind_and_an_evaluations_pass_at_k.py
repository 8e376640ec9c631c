"""The runs list has a Kind column, and an evaluation, which trains nothing and so has no reward, shows its pass@k
at the largest k it computed in the reward's place: on the page and in the live refresh's summaries."""

import re

import pytest

from runs.models import Evaluation, Run, RunKind
from trainer.loop.evaluation import Outcome, evaluation_curves, evaluation_report

pytestmark = pytest.mark.django_db


def row_of(html: str, run: Run) -> str:
    return re.search(rf'<tr data-run-id="{run.pk}">(.*?)</tr>', html, re.S)[1]


def cell_text(row: str, css_class: str) -> str:
    cell = re.search(rf'<td class="{css_class}">(.*?)</td>', row, re.S)[1]
    return " ".join(re.sub(r"<[^>]+>", " ", cell).split())


@pytest.fixture
def evaluation_run(alice, promptset_version):
    run = Run.objects.create(owner=alice, name="eval", kind=RunKind.EVAL, promptset_version=promptset_version,
                             preset="cpu-smoke", config={})
    first = {"a": [Outcome(1.0, 1.0), Outcome(0.0, 0.0)], "b": [Outcome(0.0, 1.0), Outcome(0.0, 0.0)]}
    Evaluation.objects.create(run=run, step=0, values={**evaluation_report(first), **evaluation_curves(first)})
    return run


def test_each_row_names_its_runs_kind(alices_client, make_run, evaluation_run):
    training = make_run(name="training")
    html = alices_client.get("/runs/").content.decode()
    assert "<th>Kind</th>" in html
    assert cell_text(row_of(html, training), "kind") == RunKind.RL.label
    assert cell_text(row_of(html, evaluation_run), "kind") == RunKind.EVAL.label


def test_an_evaluation_shows_its_pass_at_k_at_its_largest_k_where_a_training_run_shows_its_reward(
        alices_client, make_run, evaluation_run):
    html = alices_client.get("/runs/").content.decode()
    # pass@2 over problem a's two samples (one accepted) is 1, over b's (none) 0: the mean is 0.5.
    assert cell_text(row_of(html, evaluation_run), "reward") == "pass@2 0.500"
    summary = next(row for row in alices_client.get("/api/runs/summaries").json() if row["id"] == evaluation_run.pk)
    assert summary["pass_at_k"] == {"k": 2, "pass_at_k": pytest.approx(0.5)}
    assert summary["kind"] == "eval" and summary["kind_label"] == RunKind.EVAL.label


def test_an_evaluation_whose_every_verdict_was_censored_reads_not_measured_never_zero(alices_client, alice,
                                                                                       promptset_version):
    run = Run.objects.create(owner=alice, name="censored", kind=RunKind.EVAL, promptset_version=promptset_version,
                             preset="cpu-smoke", config={})
    first = {"a": [None, None], "b": [Outcome(None, None), None]}
    Evaluation.objects.create(run=run, step=0, values={**evaluation_report(first), **evaluation_curves(first)})
    html = alices_client.get("/runs/").content.decode()
    assert cell_text(row_of(html, run), "reward") == "pass@k –"
    summary = next(row for row in alices_client.get("/api/runs/summaries").json() if row["id"] == run.pk)
    assert summary["pass_at_k"]["pass_at_k"] is None
