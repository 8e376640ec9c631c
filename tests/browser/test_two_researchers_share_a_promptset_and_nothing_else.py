"""Two researchers at once in Chromium, one shared public promptset: each sees only their own runs and
rollouts on every page, and the queue shows everyone's order with only their own runs named."""

import re

import pytest

from proofs.models import ProofAttempt, Turn
from runs.models import QueueState, Run
from tests.browser.conftest import log_in, screenshot
from tests.stored_attempts import stored_attempt

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def second_page(browser, platform_processes):
    """bob's own browser context, open at the same time as alice's; console errors fail the test too."""
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems = []
    page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    yield page
    context.close()
    assert not problems, problems


def launch(page, name, version_label):
    page.goto("/runs/new/")
    page.fill("#id_name", name)
    page.select_option("#id_promptset_version", label=version_label)
    page.select_option("#id_preset", "cpu-smoke")
    page.click("#launch-form button[type=submit]")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    return Run.objects.get(name=name)


def test_two_researchers_see_only_their_own_runs_and_rollouts_and_the_queue_in_order(
        page, second_page, alice, bob, promptset_version):
    promptset = promptset_version.promptset
    promptset.is_public = True
    promptset.save()
    # Paused, so the four runs wait in the queue (no Ray job starts) and their order is what the test reads.
    QueueState.objects.update_or_create(pk=1, defaults={"is_paused": True, "reason": "maintenance"})
    alices, bobs = page, second_page
    log_in(alices, "alice", "alice-password")
    log_in(bobs, "bob", "bob-password")
    label = f"{promptset.name} v1"
    alice_first = launch(alices, "alice first", label)
    bob_first = launch(bobs, "bob first", label)
    launch(alices, "alice second", label)  # a second run of hers, that bob must not see either
    bob_second = launch(bobs, "bob second", label)

    problem = promptset_version.problems.order_by("pk").first()
    for run in (alice_first, bob_first):
        stored_attempt(run=run, rollout_key=f"{run.pk}-0", step=1, problem=problem, problem_key=problem.problem_key,
                       turn=Turn.FIRST, reward=1.0, lean_code=f"-- proof of {run.name}")

    for viewer, mine, theirs, places in (
            (alices, ("alice first", "alice second"), ("bob first", "bob second"), ["#1", "#3"]),
            (bobs, ("bob first", "bob second"), ("alice first", "alice second"), ["#2", "#4"])):
        viewer.goto("/runs/")
        queue = viewer.locator("#queue tbody tr")
        assert [queue.nth(i).locator(".queue-position").inner_text() for i in range(queue.count())] == places
        assert "paused by an administrator: maintenance" in viewer.locator("#run-queue").inner_text()
        listed = viewer.locator("#runs").inner_text()
        assert all(name in listed for name in mine) and not any(name in listed for name in theirs)

        viewer.goto(f"/promptsets/{promptset.pk}/problems/{problem.pk}/")
        history = viewer.locator("main").inner_text()
        assert mine[0] in history and theirs[0] not in history
        assert "1 of 1 scored first attempts in the runs you can see" in history

        viewer.goto("/runs/compare/")
        choices = viewer.locator("main").inner_text()
        assert mine[0] in choices and theirs[0] not in choices
    screenshot(alices, "two-researchers-alice-runs")
    screenshot(bobs, "two-researchers-bob-runs")

    # The other's run, rollout and API answers are 404s, as if they did not exist.
    bobs_attempt = ProofAttempt.objects.get(run=bob_first)
    for url in (f"/runs/{bob_first.pk}/", f"/proofs/{bobs_attempt.pk}/", f"/api/runs/{bob_second.pk}",
                f"/api/proofs/runs/{bob_first.pk}/attempts", f"/api/proofs/attempts/{bobs_attempt.pk}"):
        assert alices.request.get(url).status == 404, url
    assert [r["name"] for r in alices.request.get("/api/runs/").json()] == ["alice second", "alice first"]
    assert bobs.request.get(f"/proofs/{ProofAttempt.objects.get(run=alice_first).pk}/").status == 404
    assert Run.objects.filter(state="queued").count() == 4
