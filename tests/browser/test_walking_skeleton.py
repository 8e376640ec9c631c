"""A person logs in, uploads a promptset, launches a run from the form, and watches a rollout appear live."""

import json
import re

import pytest

from runs.models import Run
from tests.browser.conftest import log_in, screenshot, upload_promptset

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROBLEMS = [
    {"name": "two_plus_three", "formal_statement": "theorem two_plus_three : (2 : ℕ) + 3 = 5 := by",
     "informal_prefix": "/-- Show that 2 + 3 = 5. -/"},
    {"name": "six_times_seven", "formal_statement": "theorem six_times_seven : (6 : ℤ) * 7 = 42 := by",
     "informal_prefix": "/-- Show that 6 * 7 = 42. -/"},
]


def test_upload_launch_and_watch_a_rollout_arrive_without_reloading(page, alice, tmp_path, platform_logs):
    promptset_file = tmp_path / "arith.jsonl"
    promptset_file.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in PROBLEMS))

    log_in(page, "alice", "alice-password")
    upload_promptset(page, "arith", promptset_file)
    assert "2 problems" in page.content() or "two_plus_three" in page.content()

    page.goto("/runs/new/")
    page.fill("#id_name", "first try")
    page.select_option("#id_promptset_version", label="arith v1")
    page.select_option("#id_preset", "cpu-smoke")
    page.click("#launch-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    run = Run.objects.get(name="first try")
    # The page was rendered before the Ray job could have scored anything (that takes seconds),
    # so every rollout that shows up below arrived over the WebSocket.
    assert page.locator("#rollouts li.rollout").count() == 0

    # Without any reload, the first scored rollout appears.
    try:
        page.wait_for_selector("#rollouts li.rollout", timeout=240_000)
    except Exception:  # noqa: BLE001 - any failure to appear: re-raised below with the run's state and logs
        run.refresh_from_db()
        raise AssertionError(f"no rollout appeared; run {run.state}: {run.failure_reason}\n{platform_logs()}")
    first = page.locator("#rollouts li.rollout").first
    assert re.search(r"step [12] \(written by policy v[01]\) · First attempt", first.inner_text())
    page.wait_for_selector("#run-state.state-succeeded", timeout=240_000)
    screenshot(page, "walking-skeleton-run")
