"""At 390 px nothing scrolls sideways and the header stays on screen; /api/docs loads only the
platform's own assets; a retry that changed nothing says "no change" (issue 14)."""

import pytest

from tests.browser.conftest import log_in, screenshot
from tests.evaluations.leaderboard_cast import two_checkpoint_evaluations
from tests.viewer.conftest import make_attempt  # noqa: F401  (the fixture, shared with the view tests)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE_WIDTH = 390
LONG_LINE = "  exact " + " ".join(f"lemma_with_a_long_name_{i}" for i in range(20))


@pytest.fixture
def phone(browser, platform_processes):
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": PHONE_WIDTH, "height": 844})
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert not errors, errors


def overflow(page) -> dict:
    """The page's width beyond the viewport, and the widest visible elements that stick out."""
    return page.evaluate("""() => {
        const width = document.documentElement.clientWidth;
        const culprits = [...document.querySelectorAll('body *')].filter(n => {
            const r = n.getBoundingClientRect();
            return r.width > 0 && r.right > width + 1 && !n.closest('.table-scroll, .rollouts, pre');
        }).slice(0, 5).map(n => `${n.tagName.toLowerCase()}#${n.id}.${n.className} right=${Math.round(n.getBoundingClientRect().right)}`);
        return {scrollWidth: document.documentElement.scrollWidth, width, culprits};
    }""")


def test_at_390_px_the_runs_list_a_run_page_a_rollout_the_upload_page_and_a_problem_never_scroll_sideways(
        phone, alice, make_run, make_attempt, settings):
    run = make_run(state="running", name="a run with a rather long name to wrap on a phone")
    for step in range(1, 4):
        run.step_metrics.create(step=step, values={"reward/mean": step / 4, "lean/accuracy": step / 5})
    folder = settings.ARTIFACTS_DIR / "runs" / str(run.pk) / "checkpoints" / "step-000003-with-a-long-folder-name"
    run.checkpoints.create(step=3, path=str(folder))
    attempt = make_attempt(run, step=3, lean_code=f"theorem t : True := by\n{LONG_LINE}",
                           checked_code=f"import Mathlib\n\ntheorem t : True := by\n{LONG_LINE}",
                           rollout_key="s3-" + "k" * 80)
    problem = run.promptset_version.promptset.problems.first()
    problem.formal_statement = f"theorem t (x : ℕ) :\n  x = x := by\n{LONG_LINE}"
    problem.save()
    log_in(phone, "alice", "alice-password")
    for name, address in (("runs list", "/runs/"), ("run page", f"/runs/{run.pk}/"),
                          ("rollout", f"/proofs/{attempt.pk}/"), ("upload page", "/promptsets/upload/"),
                          ("problem page", f"/promptsets/{problem.promptset_id}/problems/{problem.pk}/")):
        phone.goto(address)
        phone.wait_for_load_state("networkidle")
        measured = overflow(phone)
        assert measured["scrollWidth"] <= measured["width"], \
            f"the {name} scrolls sideways at {PHONE_WIDTH} px ({measured['scrollWidth']} px wide): {measured['culprits']}"
        for part in (".topbar .badge", ".topbar .username", ".topbar .logout button"):
            box = phone.locator(part).bounding_box()
            assert box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE_WIDTH, f"{part} is off-screen on the {name}"
        screenshot(phone, f"phone-{name.replace(' ', '-')}")


def test_at_390_px_a_benchmarks_leaderboard_and_an_evaluations_pass_at_k_page_never_scroll_sideways(phone, alice):
    benchmark, _, _, (evaluation, _) = two_checkpoint_evaluations(alice)
    log_in(phone, "alice", "alice-password")
    for name, address in (("leaderboard", f"/benchmarks/{benchmark.pk}/"), ("evaluation", f"/runs/{evaluation.pk}/")):
        phone.goto(address)
        phone.wait_for_load_state("networkidle")
        measured = overflow(phone)
        assert measured["scrollWidth"] <= measured["width"], \
            f"the {name} scrolls sideways at {PHONE_WIDTH} px ({measured['scrollWidth']} px wide): {measured['culprits']}"
        screenshot(phone, f"phone-{name}")


def test_the_api_docs_render_from_the_platforms_own_assets(page, alice, platform_processes):
    foreign = []
    page.on("request", lambda request: foreign.append(request.url)
            if not request.url.startswith((platform_processes["url"], "data:")) else None)
    log_in(page, "alice", "alice-password")
    page.goto("/api/docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=15_000)
    assert "Lean RL platform" in page.locator(".swagger-ui .info .title").inner_text()
    assert foreign == [], f"/api/docs loaded assets from outside the platform: {foreign}"


def test_a_retry_whose_code_equals_its_first_attempt_says_no_change(page, alice, make_run, make_attempt):
    run = make_run(state="running")
    first = make_attempt(run, rollout_key="first", lean_code="  simp")
    retry = make_attempt(run, rollout_key="retry", turn="retry", parent=first, parent_rollout_key="first",
                         lean_code="  simp")
    log_in(page, "alice", "alice-password")
    page.goto(f"/proofs/{retry.pk}/")
    assert "No change" in page.locator("#retry-compare").inner_text(), "an unchanged retry shows an unmarked diff"
    assert page.locator("#code-diff").count() == 0
