"""A cpu-smoke pipeline launched from its form runs to its end through the real stack; its page and its lineage page,
in Chromium at 1,400 and 390 px wide, show the iteration table's numbers the API gives, every lineage edge, and the
stand-in label, without scrolling sideways on the phone."""

import re

import pytest

from pipelines.models import Pipeline, PipelineState
from promptsets.versions import create_smoke_promptset
from tests.browser.conftest import log_in, screenshot
from tests.browser.test_small_screens_and_local_assets import overflow
from tests.pipelines.conftest import make_version
from tests.pipelines.test_a_two_iteration_cpu_smoke_pipeline_runs_end_to_end_through_the_platform import (
    HELD_OUT,
    wait_for_end,
)
from trainer.sft.smoke_model import SMOKE_HEADER

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FIGURES = ("proofs_harvested", "corpus_size", "corpus_refused", "problems_unsolved", "benchmark_gain")


def shown_figures(page) -> list[dict]:
    return page.eval_on_selector_all("#iterations tr[data-iteration]", """rows => rows.map(row => Object.fromEntries(
        [...row.querySelectorAll('[data-figure]')].map(cell => [cell.dataset.figure, cell.textContent.trim()])))""")


def as_shown(value) -> str:
    return "–" if value is None else str(value)


def test_the_pipeline_and_its_lineage_show_what_the_api_says_at_both_widths(page, alice, browser, platform_logs):
    smoke, _ = create_smoke_promptset(alice)
    make_version(alice, "held-out smoke", [(HELD_OUT.problem_id, HELD_OUT.formal_statement)], header=SMOKE_HEADER)
    log_in(page, "alice", "alice-password")
    page.goto("/pipelines/new/")
    page.fill("#id_name", "smoke loop")
    page.select_option("#id_preset", "cpu-smoke")
    page.select_option("#id_training_version", label=str(smoke.versions.get()))
    page.select_option("#id_benchmark_version", label="held-out smoke v1")
    page.fill("#id_harvest_samples", "2")
    page.fill("#id_benchmark_samples", "2")
    page.fill("#id_rl_fields", '{"total_steps": 2}')
    page.fill("#id_max_iterations", "1")
    page.click("#pipeline-form button[type=submit]")
    page.wait_for_url(re.compile(r"/pipelines/\d+/$"))
    pipeline = wait_for_end(Pipeline.objects.get(name="smoke loop"), platform_logs)
    assert pipeline.state == PipelineState.SUCCEEDED, f"{pipeline.failure_reason}\n{platform_logs()}"

    body = page.request.get(f"/api/pipelines/{pipeline.pk}").json()
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900})
        for path in (f"/pipelines/{pipeline.pk}/", f"/pipelines/{pipeline.pk}/lineage/"):
            page.goto(path)
            shown = shown_figures(page)
            assert [{figure: row[figure] for figure in FIGURES} for row in shown] == [
                {figure: as_shown(iteration[figure]) for figure in FIGURES} for iteration in body["iterations"]]
            for row, iteration in zip(shown, body["iterations"], strict=True):
                expected = ("not measured" if iteration["benchmark_solved"] is None else
                            f"{iteration['benchmark_solved']} of {iteration['benchmark_problems']} "
                            f"(pass@{iteration['benchmark_k']}")
                assert row["benchmark_solved"].startswith(expected)
            assert page.locator("#standin-label").is_visible()
            measured = overflow(page)
            assert measured["scrollWidth"] <= measured["width"], f"{path} scrolls sideways at {width} px: {measured}"
            screenshot(page, f"pipeline-{path.strip('/').replace('/', '-')}-{width}px")
        edges = page.locator("#lineage tbody tr[data-stage]")
        assert edges.count() == len(body["lineage"]) == 4
        for edge in body["lineage"]:
            assert page.locator(f'#lineage a[href="{edge["run"]["url"]}"]').count() == 1
