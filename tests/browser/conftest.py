"""Headless Chromium (Debian's, driven by Playwright) against the platform's real ASGI server."""

import re
import time
from http import HTTPStatus
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-quic"]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


# Module scope, not session: while Playwright's sync API is open its event loop runs in the test
# thread, and every later test that uses async_to_sync (Channels, the WebSocket tests) would fail.
@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run `deploy/bootstrap.sh --browser` (make test does) to install Debian's chromium")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an asyncio loop running in the test thread; Django would then
    # refuse the tests' own (synchronous) database calls. Nothing here shares a connection across
    # threads. Only while the loop runs: the variable must not reach other tests' subprocesses
    # (`check --deploy` rightly refuses it in production).
    with pytest.MonkeyPatch.context() as env, sync_playwright() as playwright:
        env.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, platform_processes):
    """A fresh browser tab; the test fails if the page logs a console error or throws."""
    context = browser.new_context(base_url=platform_processes["url"], viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    problems = []
    page.on("console", lambda message: problems.append(f"console.{message.type}: {message.text}")
            if message.type == "error" else None)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.console_problems = problems
    yield page
    context.close()
    assert not problems, "the page reported errors:\n" + "\n".join(problems)


def log_in(page, username, password):
    page.goto("/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/login/" not in url)


def click_step(page, chart: str, step: int) -> None:
    """Move the mouse onto ``step`` of the run page's ``chart``, as a person does, and click."""
    page.wait_for_function("name => document.querySelector(`[data-chart=${name}]`)?.stepChart?.plot", arg=chart)
    x, y = page.evaluate("""([name, step]) => {
        const plot = document.querySelector(`[data-chart=${name}]`).stepChart.plot;
        const box = plot.over.getBoundingClientRect();
        return [box.left + plot.valToPos(step, "x"), box.top + box.height / 2];
    }""", [chart, step])
    page.mouse.move(x, y)
    page.mouse.click(x, y)


def shown_keys(page) -> list[str]:
    """The rollout keys of the run page's list, top to bottom."""
    return page.eval_on_selector_all("#rollouts li[data-rollout-key]", "items => items.map(i => i.dataset.rolloutKey)")


def rollout_keys_seen_by(browser, link: str, username: str) -> list[str] | None:
    """What another person sees who opens a shared run-page link on a phone-sized screen: the listed rollouts' keys,
    sorted, or None where the run is not theirs to see (a 404 that lists no rollout)."""
    context = browser.new_context(base_url=link.split("/runs/")[0], viewport={"width": 390, "height": 900})
    other = context.new_page()
    try:
        log_in(other, username, f"{username}-password")
        response = other.goto(link)
        if response.status == HTTPStatus.NOT_FOUND:
            assert "data-rollout-key" not in other.content()
            return None
        other.wait_for_selector("body[data-live]")
        return sorted(shown_keys(other))
    finally:
        context.close()


def upload_promptset(page, name: str, file_path, timeout_ms: int = 30_000) -> None:
    """Upload a promptset file through the upload form, as a person does, and wait for its page."""
    page.goto("/promptsets/upload/")
    page.fill("#id_name", name)
    page.set_input_files("#id_file", str(file_path))
    page.click("#promptset-upload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/promptsets/\d+/$"), timeout=timeout_ms)


def screenshot(page, name):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def forget_refused_load(page, status: int = 400) -> None:
    """Chromium logs a page that comes back with ``status`` as a console error; where the test asked for
    that refusal, wait for the line (it may follow the load) and drop exactly it, and fail if it never came."""
    line = f"console.error: Failed to load resource: the server responded with a status of {status} ({HTTPStatus(status).phrase})"
    deadline = time.monotonic() + 10
    while line not in page.console_problems and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert line in page.console_problems, f"the page was not refused with {status}: {page.console_problems}"
    page.console_problems.remove(line)


def fill_launch_fields(page, values: dict) -> None:
    """Fill launch form fields as a person does: open the collapsed group a field is in (its summary), then type."""
    for field, value in values.items():
        group = page.locator("#launch-form details.field-group").filter(has=page.locator(f"#id_{field}"))
        if group.count() and group.get_attribute("open") is None:
            group.locator("summary").click()
        page.fill(f"#id_{field}", str(value))
