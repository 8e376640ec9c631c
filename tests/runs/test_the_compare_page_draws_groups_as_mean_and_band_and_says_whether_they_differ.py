"""The compare page takes groups: each drawn as its seeds' mean with a band (min–max or ± one standard deviation),
smoothed only when asked, on the axis asked for, the configuration fields that differ first; between two groups it
says in words whether the difference over the last window of steps exceeds the seeds' spread. Every setting of the
view is read from the URL, so a link reproduces it."""

import html as html_text
import json
import re
from statistics import fmean, stdev

import pytest

from runs.models import Evaluation, RunGroup, StepMetrics
from trainer.config import RunConfig
from trainer.loop.evaluation import CURVE

pytestmark = pytest.mark.django_db

STEPS = range(1, 11)


@pytest.fixture
def make_group(alice, make_run):
    def make(name, rewards_by_seed, learning_rate=1e-5):
        group = RunGroup.objects.create(owner=alice, name=name, launch={"preset": "cpu-demo"}, grid={})
        for seed, rewards in enumerate(rewards_by_seed):
            config = RunConfig.from_preset("cpu-demo", {"schedule": {"seed": seed},
                                                        "optimizer": {"learning_rate": learning_rate}})
            run = make_run(name=f"{name} · seed {seed}", run_group=group, config=config.to_json_dict())
            for step, reward in zip(STEPS, rewards, strict=True):
                StepMetrics.objects.create(run=run, step=step, values={"reward/mean": reward, "rollouts": 4,
                                                                       "response_length/mean": 10 * step})
        return group

    return make


def chart_of(html: str) -> dict:
    return json.loads(re.search(r'<script id="compare-chart-data" type="application/json">(.*?)</script>', html, re.S)[1])


def verdicts_of(html: str) -> list[str]:
    section = re.search(r'<section id="noise-verdicts">(.*?)</section>', html, re.S)[1]
    return [" ".join(html_text.unescape(re.sub(r"<[^>]+>", " ", item)).split()) for item in re.findall(r"<li[^>]*>(.*?)</li>", section, re.S)]


SEEDS_A = [[0.1 * s + 0.01 * k for s in STEPS] for k in range(3)]


def test_a_groups_line_is_its_seeds_mean_with_their_min_and_max(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    chart = chart_of(alices_client.get(f"/runs/compare/?groups={group.pk}").content.decode())
    (column,) = chart["columns"]
    assert column["seeds"] == 3
    for (x, mean, low, high), step in zip(column["line"], STEPS, strict=True):
        values = [seed[step - 1] for seed in SEEDS_A]
        assert (x, mean, low, high) == pytest.approx((step, fmean(values), min(values), max(values)))


def test_the_band_may_be_one_standard_deviation_and_the_seeds_drawn_on_demand(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    chart = chart_of(alices_client.get(f"/runs/compare/?groups={group.pk}&band=std&seeds=1").content.decode())
    (column,) = chart["columns"]
    values = [seed[0] for seed in SEEDS_A]
    assert column["line"][0][2:] == pytest.approx([fmean(values) - stdev(values), fmean(values) + stdev(values)])
    assert [len(seed["points"]) for seed in column["seedLines"]] == [10, 10, 10]
    assert chart_of(alices_client.get(f"/runs/compare/?groups={group.pk}").content.decode())["columns"][0][
        "seedLines"] == []


def test_smoothing_is_an_exponential_moving_average_and_off_by_default(alices_client, make_group):
    group = make_group("A", [[0.0, 1.0] + [1.0] * 8, [0.0, 1.0] + [1.0] * 8])
    line = chart_of(alices_client.get(f"/runs/compare/?groups={group.pk}&smoothing=0.5").content.decode())[
        "columns"][0]["line"]
    assert [point[1] for point in line[:3]] == pytest.approx([0.0, 0.5, 0.75])


def test_the_x_axis_may_be_generated_tokens(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    line = chart_of(alices_client.get(f"/runs/compare/?groups={group.pk}&axis=tokens").content.decode())[
        "columns"][0]["line"]
    # 4 answers of 10 × step tokens a step, summed up to the step.
    assert [point[0] for point in line[:3]] == [40, 120, 240]


def test_identical_groups_show_no_difference_beyond_the_seeds_spread(alices_client, make_group):
    first, second = make_group("A", SEEDS_A), make_group("B", SEEDS_A, learning_rate=2e-5)
    html = alices_client.get(f"/runs/compare/?groups={first.pk}&groups={second.pk}&window=3").content.decode()
    (verdict,) = verdicts_of(html)
    assert verdict.startswith("B against A on reward/mean, steps 8–10: No difference beyond the seeds' spread")
    assert "3 vs 3 seeds" in verdict and "Welch's t-test" in verdict


def test_groups_far_apart_show_a_difference(alices_client, make_group):
    first = make_group("A", SEEDS_A)
    second = make_group("B", [[value + 0.5 for value in seed] for seed in SEEDS_A], learning_rate=2e-5)
    html = alices_client.get(f"/runs/compare/?groups={first.pk}&groups={second.pk}").content.decode()
    (verdict,) = verdicts_of(html)
    assert "A difference beyond the seeds' spread" in verdict and "3 vs 3 seeds" in verdict


def test_the_configuration_table_shows_only_what_differs_and_every_field_one_click_away(alices_client, make_group):
    first, second = make_group("A", SEEDS_A), make_group("B", SEEDS_A, learning_rate=2e-5)
    html = alices_client.get(f"/runs/compare/?groups={first.pk}&groups={second.pk}").content.decode()
    differing = re.search(r'<table class="config-diff">(.*?)</table>', html, re.S)[1]
    paths = re.findall(r"<td><code>(.*?)</code></td>", differing)
    assert paths == ["optimizer.learning_rate", "schedule.seed"]
    assert "varies: 0, 1, 2" in differing
    every = re.search(r'<details class="config-all"><summary>All (\d+) fields</summary>', html)
    assert int(every[1]) > 20


def test_each_runs_pass_at_k_per_checkpoint_is_one_table_with_its_best_marked(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    run = group.runs.order_by("pk").first()
    for step, value in ((5, 0.25), (10, 0.5)):
        Evaluation.objects.create(run=run, step=step, values={  # named as trainer/loop/evaluation.py names them
            f"{CURVE}problems_scored": 3, f"{CURVE}pass@1": value / 2, f"{CURVE}pass@4": value})
    html = alices_client.get(f"/runs/compare/?groups={group.pk}").content.decode()
    table = re.search(r'<table id="evaluations-table">(.*?)</table>', html, re.S)[1]
    assert "step 5" in table and "step 10" in table
    assert re.search(r"<mark[^>]*>pass@4 0\.500 \(best\)</mark>", table)


def test_the_view_is_read_back_from_its_url(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    html = alices_client.get(f"/runs/compare/?groups={group.pk}&metric=rollouts&band=std&smoothing=0.3&axis=tokens"
                             f"&window=4&seeds=1").content.decode()
    assert re.search(r'<option value="rollouts" selected>', html)
    assert re.search(r'<option value="std" selected>', html) and re.search(r'<option value="tokens" selected>', html)
    assert 'name="smoothing" min="0" max="0.99" step="0.05" value="0.3"' in html
    assert 'name="window" min="1" step="1" value="4"' in html and 'name="seeds" value="1" checked' in html
    assert f'<option value="{group.pk}" selected>' in html


def test_a_setting_the_page_cannot_use_is_said_not_silently_replaced(alices_client, make_group):
    group = make_group("A", SEEDS_A)
    html = alices_client.get(f"/runs/compare/?groups={group.pk}&band=iqr&smoothing=2").content.decode()
    assert "band &#x27;iqr&#x27; is not one of minmax, std: min–max is shown" in html
    assert "smoothing &#x27;2&#x27; is a factor from 0 (off) to below 1: no smoothing is shown" in html


def test_a_strangers_group_is_not_compared(client, charlie, make_group):
    group = make_group("A", SEEDS_A)
    client.force_login(charlie)
    assert "compare-chart-data" not in client.get(f"/runs/compare/?groups={group.pk}").content.decode()


def test_a_grid_is_drawn_as_parallel_coordinates_from_its_varied_fields_to_the_final_metric(
        alice, alices_client, make_run):
    group = RunGroup.objects.create(owner=alice, name="lr grid", launch={"preset": "cpu-demo"},
                                    grid={"learning_rate": [1e-5, 2e-5]})
    finals = {}
    for learning_rate in (1e-5, 2e-5):
        for seed in (0, 1):
            config = RunConfig.from_preset("cpu-demo", {"schedule": {"seed": seed},
                                                        "optimizer": {"learning_rate": learning_rate}})
            run = make_run(name=f"lr {learning_rate} seed {seed}", run_group=group, config=config.to_json_dict())
            rewards = [learning_rate * 10_000 + seed / 10 + step / 100 for step in STEPS]
            for step, reward in zip(STEPS, rewards, strict=True):
                StepMetrics.objects.create(run=run, step=step, values={"reward/mean": reward})
            finals[run.pk] = fmean(rewards[-3:])
    html = alices_client.get(f"/runs/compare/?groups={group.pk}&window=3").content.decode()
    (grid,) = json.loads(re.search(r'<script id="compare-grids" type="application/json">(.*?)</script>', html, re.S)[1])
    assert grid["axes"] == ["learning_rate", "reward/mean, last 3 steps"]
    drawn = {line["id"]: line for line in grid["lines"]}
    assert set(drawn) == set(finals)
    for run in group.runs.all():
        assert drawn[run.pk]["values"] == [run.resolved_config.optimizer.learning_rate]
        assert drawn[run.pk]["final"] == pytest.approx(finals[run.pk])
