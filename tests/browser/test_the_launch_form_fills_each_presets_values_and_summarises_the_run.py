"""In Chromium, the launch form as a person uses it: choosing a preset fills every field with that preset's value
as the API resolves it, shows that preset's range alone, and the summary's figures are the resolved config's;
the later groups are collapsed until opened, at 1,400 px and at 390 px; no number is in exponent form unless it
is below 0.001 (issue 37)."""

import importlib
import re

import pytest

from runs.launch_contract import SETTABLE_FIELDS
from tests.browser.conftest import fill_launch_fields, forget_refused_load, log_in, screenshot
from tests.runs.test_numbers_on_the_launch_page_are_written_as_people_read_them import (
    exponent_numbers_at_or_above_a_thousandth,
)
from trainer.config import PRESETS

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE_WIDTH = 390
# Each preset chosen after a different one, and the page's first preset chosen again at the end.
CHOSEN_IN_TURN = ["cpu-smoke", "h100x8", "cpu-demo", "cpu-smoke"]


@pytest.fixture(autouse=True)
def registered_models(transactional_db):
    """The registry as the migrations leave it (a transactional test starts from an emptied database)."""
    from runs.models import RegisteredModel

    def migration(name):
        return importlib.import_module(f"runs.migrations.{name}")

    entries = [*migration("0004_run_queue_quotas_and_model_registry").PRESET_MODELS,
               migration("0009_the_smoke_model").SMOKE_MODEL]
    reworded = migration("0010_registry_descriptions_say_what_the_models_are_now").DESCRIPTIONS
    for name, source, name_or_path, description in entries:
        RegisteredModel.objects.get_or_create(name=name, defaults={
            "source": source, "name_or_path": name_or_path, "description": reworded.get(name, ("", description))[1]})


def resolved_config(page, **fields) -> dict:
    """The config the API resolves for these launch fields (GET /api/runs/launch-summary)."""
    response = page.request.get("/api/runs/launch-summary", params=fields)
    assert response.ok, response.text()
    return response.json()["config"]


def choose_preset(page, preset: str) -> None:
    page.select_option("#id_preset", preset)
    # The summary is drawn at once from the page's data, then again from the API: wait for the API's.
    page.wait_for_function("preset => document.getElementById('launch-summary-status').textContent"
                           ".startsWith(`The ${preset} preset with the values above`)", arg=preset)


def config_value(config: dict, path: str):
    section, field = path.split(".")
    return config[section][field]


def assert_fields_hold(page, preset: str, config: dict) -> None:
    for name, settable in SETTABLE_FIELDS.items():
        value = config[settable.section][settable.field]
        shown = page.input_value(f"#id_{name}")
        if value is None:
            assert shown == "", f"{preset}: {name} shows {shown!r}, the preset leaves it unset"
            assert page.get_attribute(f"#id_{name}", "placeholder").startswith("none"), name
        else:
            assert shown != "" and float(shown) == value, f"{preset}: {name} shows {shown!r}, resolved {value!r}"
            if settable.kind is int:
                assert re.fullmatch(r"-?\d+", shown), f"{preset}: the integer {name} is written {shown!r}"
        allowed = page.locator(f'[data-allowed-for="{name}"]').text_content()
        assert allowed.startswith(f"Allowed for {preset}: "), allowed
        assert not any(other in allowed for other in PRESETS if other != preset), allowed


def assert_summary_agrees(page, preset: str, config: dict) -> None:
    figures = page.locator("#launch-summary [data-config-path]")
    assert figures.count() >= 12
    for index in range(figures.count()):
        figure = figures.nth(index)
        path, text = figure.get_attribute("data-config-path"), figure.text_content()
        value = config_value(config, path)
        if value is None:
            assert text.startswith("none"), f"{preset}: {path} reads {text!r}, the config leaves it unset"
        elif isinstance(value, str):
            assert text == value, f"{preset}: {path} reads {text!r}, resolved {value!r}"
        else:
            assert float(text.replace(",", "")) == value, f"{preset}: {path} reads {text!r}, resolved {value!r}"
    answers = config["rollout"]["prompts_per_step"] * config["rollout"]["samples_per_prompt"]
    lean = page.locator('#launch-summary [data-figure]')
    assert lean.get_attribute("data-figure") == str(answers) and lean.text_content() == f"at most {answers:,}"
    step_time = page.locator("#launch-summary dt:text-is('Step time') + dd").text_content()
    if preset.startswith("cpu-"):
        assert step_time.startswith("about ") and "an estimate, not a measurement" in step_time, step_time
    else:
        assert step_time.startswith("not measured"), step_time


def test_choosing_each_preset_fills_every_field_with_its_resolved_value_and_the_summary_agrees(page, alice):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    assert_fields_hold(page, "cpu-demo", resolved_config(page, preset="cpu-demo"))
    for preset in CHOSEN_IN_TURN:
        choose_preset(page, preset)
        config = resolved_config(page, preset=preset)
        assert_fields_hold(page, preset, config)
        assert_summary_agrees(page, preset, config)
        chosen = page.locator("#preset-descriptions li.chosen")
        assert chosen.get_attribute("data-preset") == preset
        assert f"{preset}: {config['model']['name_or_path'].split('/')[-1]} (" in chosen.text_content()
        screenshot(page, f"launch-{preset}")


def test_editing_a_field_summarises_the_edited_run_and_a_refused_value_is_said(page, alice):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    fill_launch_fields(page, {"prompts_per_step": 6, "samples_per_prompt": 3})
    page.wait_for_function("() => document.querySelector('#launch-summary [data-figure]').dataset.figure === '18'")
    assert_summary_agrees(page, "cpu-demo", resolved_config(page, preset="cpu-demo", prompts_per_step=6,
                                                            samples_per_prompt=3))
    fill_launch_fields(page, {"prompts_per_step": 3})  # not a multiple of the mini-batch (2): the launch refuses it
    page.wait_for_function("() => document.getElementById('launch-summary-rows').classList.contains('stale')")
    status = page.locator("#launch-summary-status").text_content()
    assert "would be refused" in status and "must be a multiple of" in status, status
    forget_refused_load(page, 422)


def page_numbers(page) -> str:
    """Every text of the page, hidden groups and the presets' data included, and every field's value and limits."""
    return page.evaluate("""() => [document.querySelector('main').textContent,
        ...[...document.querySelectorAll('#launch-form input:not([type=hidden]), #launch-form select')]
            .flatMap(node => [node.value, node.placeholder || '', node.min || '', node.max || ''])].join('\\n')""")


def test_no_number_on_the_page_is_in_exponent_form_unless_below_0_001(page, alice):
    log_in(page, "alice", "alice-password")
    page.goto("/runs/new/")
    for preset in CHOSEN_IN_TURN:
        choose_preset(page, preset)
        text = page_numbers(page)
        assert "2147483647" in text or "2,147,483,647" in text  # the seed's bound, once 2.14748e+09
        assert exponent_numbers_at_or_above_a_thousandth(text) == [], preset


def overflow(page) -> int:
    return page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")


@pytest.mark.parametrize("width", [1400, PHONE_WIDTH])
def test_the_later_groups_are_collapsed_until_opened(browser, platform_processes, alice, width):
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": width, "height": 900})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        log_in(page, "alice", "alice-password")
        page.goto("/runs/new/")
        page.wait_for_load_state("networkidle")
        for first in ("#id_name", "#id_promptset_version", "#id_kind", "#id_preset", "#id_model"):
            assert page.locator(first).is_visible(), first
        for later in ("#id_total_steps", "#id_prompts_per_step", "#id_max_staleness"):
            assert not page.locator(later).is_visible(), f"{later} is shown before its group is opened"
        assert overflow(page) <= 0, f"the launch page scrolls sideways at {width} px"
        screenshot(page, f"launch-{width}px")
        for group in ("Schedule", "Sampling", "Asynchronous RL and evaluation"):
            page.locator("#launch-form summary", has_text=group).click()
        for later in ("#id_total_steps", "#id_prompts_per_step", "#id_max_staleness"):
            assert page.locator(later).is_visible(), f"{later} is still hidden with its group open"
        assert overflow(page) <= 0, f"the launch page with every group open scrolls sideways at {width} px"
        screenshot(page, f"launch-{width}px-opened")
    finally:
        context.close()
    assert not errors, errors
