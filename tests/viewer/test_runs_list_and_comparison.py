"""The runs list (sorted, filtered, latest reward and accuracy with sparklines) and the configuration diff."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.queries import config_diff

pytestmark = pytest.mark.django_db


def test_the_list_shows_latest_reward_and_accuracy_with_their_series(make_run, alice, logged_in):
    run = make_run(state="running", name="learning", started_at=timezone.now() - timedelta(minutes=5))
    for step, reward in enumerate([0.1, 0.2, 0.4]):
        run.step_metrics.create(step=step, values={"reward/mean": reward, "lean/accuracy": reward / 2})
    [summary] = logged_in(alice).get("/api/runs/summaries").json()
    assert (summary["reward"], summary["accuracy"]) == (0.4, 0.2)
    assert summary["reward_series"] == [0.1, 0.2, 0.4]
    assert summary["model"] == "SmolLM2-135M-Instruct"
    assert 295 <= summary["elapsed_s"] <= 400


def test_sparklines_keep_only_the_latest_steps(make_run, alice, logged_in):
    run = make_run(state="running")
    for step in range(40):
        run.step_metrics.create(step=step, values={"reward/mean": float(step)})
    [summary] = logged_in(alice).get("/api/runs/summaries").json()
    assert summary["reward_series"] == [float(step) for step in range(10, 40)]


def test_the_list_filters_by_state_and_name_and_sorts_by_a_column(make_run, alice, logged_in):
    make_run(state="running", name="beta", current_step=3)
    make_run(state="failed", name="alpha", current_step=9)
    make_run(state="running", name="gamma", current_step=1)
    client = logged_in(alice)
    names = lambda query: [s["name"] for s in client.get(f"/api/runs/summaries?{query}").json()]
    assert names("state=running&sort=name") == ["beta", "gamma"]
    assert names("sort=-step") == ["alpha", "beta", "gamma"]
    assert names("q=amm") == ["gamma"]
    page = client.get("/runs/?state=failed").content.decode()
    assert "alpha" in page and "beta" not in page


def test_the_configuration_diff_lists_only_settings_that_differ():
    this = {"rollout": {"temperature": 1.0, "top_p": 1.0}, "preset": "cpu-demo"}
    other = {"rollout": {"temperature": 0.7, "top_p": 1.0}, "preset": "cpu-demo", "extra": {"x": 1}}
    assert config_diff(this, other) == [
        {"path": "extra.x", "this": None, "other": 1, "only_in": "other"},
        {"path": "rollout.temperature", "this": 1.0, "other": 0.7, "only_in": ""},
    ]


def test_the_run_page_shows_the_diff_against_the_chosen_run(make_run, alice, logged_in):
    from trainer.config import RunConfig

    base = make_run(name="base")
    changed_config = RunConfig.from_preset("cpu-demo", {"rollout": {"temperature": 0.7}}).to_json_dict()
    other = make_run(name="cooler", config=changed_config)
    page = logged_in(alice).get(f"/runs/{base.pk}/?diff={other.pk}").content.decode()
    assert 'id="config-diff"' in page
    assert "rollout.temperature" in page and "0.7" in page


def test_the_comparison_page_overlays_the_chosen_runs(make_run, alice, logged_in):
    first, second = make_run(name="first run"), make_run(name="second run")
    first.step_metrics.create(step=0, values={"reward/mean": 0.5})
    response = logged_in(alice).get(f"/runs/compare/?runs={first.pk}&runs={second.pk}")
    chart = response.context["chart"]
    assert [(column["name"], column["line"]) for column in chart["columns"]] == [
        ("first run", [[0, 0.5, 0.5, 0.5]]), ("second run", [])]
    assert 'id="compare-chart-data"' in response.content.decode()
