"""The event path under load: a run publishes 20,000 rollout events while three Chromium pages watch it.

The real path end to end: the trainer's publisher (trainer.observability.events, through its buffered sink) →
the run's Redis Stream → the ingester (``manage.py ingest_events``, its own process) → PostgreSQL
→ the Channels layer → uvicorn → the run page (frontend/src/run.js) in three headless Chromium
pages logged in as the run's owner. It prints:

- events per second ingested (first publish to the 20,000th row stored), against the baseline
  of publishing the same events into Redis alone, measured in the same run;
- Redis memory (INFO used_memory) before, at its peak, and at the end (once the ingester has
  trimmed the stream), and the stream's length at the end;
- the browser-side lag: from an event's storage in PostgreSQL to the moment a page has handled
  it, in order (the page's ``data-last-event-number`` reaching its number), p50, p95 and max over
  the three pages; the same from the trainer's publication (its ``time``), which adds the
  ingester's backlog while the burst outruns it; and whether every page reached the last event.

Rerun:  .venv/bin/python benchmarks/event_path_load.py [--events 20000] [--pages 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

import viewer_stack

# Playwright's sync API keeps an event loop running in this thread; Django would then refuse the
# benchmark's own (synchronous, single-threaded) queries.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

# Recorded in each page: when it handled each event number (the page sets data-last-event-number
# as it handles events, strictly in order, so a change from a to b means a+1…b were handled now).
RECORD_HANDLED = """
window.__handled = [];
window.__arrived = {};  // number → when its WebSocket frame arrived (before the page's own handler runs)
const PageWebSocket = window.WebSocket;
window.WebSocket = function (...args) {
  const socket = new PageWebSocket(...args);
  socket.addEventListener("message", (message) => {
    const now = Date.now();
    for (const event of JSON.parse(message.data).events || []) window.__arrived[event.number] ??= now;
  });
  return socket;
};
new MutationObserver((records) => {
  const now = Date.now();
  const before = Number(records[0].oldValue || document.body.dataset.lastEventNumber || 0);
  const after = Number(document.body.dataset.lastEventNumber || 0);
  for (let n = before + 1; n <= after; n++) window.__handled.push([n, now]);
}).observe(document, { subtree: true, attributes: true, attributeOldValue: true,
                      attributeFilter: ["data-last-event-number"] });
"""


def rollout(index: int):
    from trainer.observability.events import RolloutFinished

    code = "theorem p (x : ℕ) : x + 0 = x := by\n  simp\n"
    return RolloutFinished(
        rollout_key=f"s{index // 2048}-r{index}", step=index // 2048, problem_id=f"p{index % 256}",
        prompt="Complete the following Lean 4 code:\n" + code * 30, response="<think>" + "thinking " * 100 + "</think>",
        reasoning="thinking " * 100, lean_code=code, checked_code="import Mathlib\n" + code, verdict="valid", reward=1.0,
        lean_messages=[], num_tokens=400)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()

    services, root = viewer_stack.start_services(with_redis=True)
    processes, browser, playwright = [], None, None
    try:
        viewer_stack.set_up_django()
        import redis
        from django.conf import settings

        from runs.models import DeadLetter, RunEvent
        from trainer.observability.events import (
            BufferedStreamSink,
            EventPublisher,
            EventType,
            RedisStreamSink,
            stream_key,
        )

        owner, version = viewer_stack.make_owner_and_version()
        run = viewer_stack.make_run(owner, version, "load", state="running")
        client = redis.Redis.from_url(settings.REDIS_URL)
        events = [rollout(index) for index in range(args.events)]

        def publish_all(run_id: str) -> float:
            """The trainer's own publisher and buffered sink; seconds until Redis has every event."""
            sink = BufferedStreamSink(RedisStreamSink(settings.REDIS_URL, run_id))
            publisher = EventPublisher(run_id, sink)
            started = time.perf_counter()
            for payload in events:
                publisher.publish(EventType.ROLLOUT_FINISHED, payload)
            if run_id == str(run.pk):
                publisher.publish(EventType.RUN_FINISHED, {"status": "succeeded", "reason": "", "step": 10})
            sink.close()
            return time.perf_counter() - started

        # Baseline: the same events published into a stream nobody reads (no run has id 0), then removed.
        baseline_s = publish_all("0")
        client.delete(stream_key("0"))

        port, processes = viewer_stack.start_web_and_ingester(root)

        from playwright.sync_api import sync_playwright

        playwright = sync_playwright().start()
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-background-timer-throttling", "--disable-renderer-backgrounding"])
        pages = []
        for _ in range(args.pages):
            context = browser.new_context(base_url=f"http://127.0.0.1:{port}")
            page = context.new_page()
            page.add_init_script(RECORD_HANDLED)
            page.goto("/login/")
            page.fill("#id_username", "bench")
            page.fill("#id_password", "bench-password")
            page.click("button[type=submit]")
            page.wait_for_url(lambda url: "/login/" not in url)
            page.goto(f"/runs/{run.pk}/")
            page.wait_for_selector("body[data-live=connected]")
            pages.append(page)
        time.sleep(2)  # the ingester has made the run's consumer group

        memory_before = client.info("memory")["used_memory"]
        peak = [memory_before]
        sampling = threading.Event()

        def sample_memory():
            sampler = redis.Redis.from_url(settings.REDIS_URL)
            while not sampling.is_set():
                peak[0] = max(peak[0], sampler.info("memory")["used_memory"])
                time.sleep(0.25)

        threading.Thread(target=sample_memory, daemon=True).start()

        started = time.perf_counter()
        publishing = threading.Thread(target=publish_all, args=(str(run.pk),))
        publishing.start()
        total = args.events + 1
        deadline = started + args.timeout
        stored = 0
        while time.perf_counter() < deadline:
            stored = RunEvent.objects.filter(run=run).count()
            if stored >= total:
                break
            time.sleep(0.25)
        ingest_s = time.perf_counter() - started
        publishing.join(60)
        # Every page must reach the last event; a page's lag is measured until it has.
        reached = []
        for page in pages:
            try:
                page.wait_for_selector(f"body[data-last-event-number='{total}']",
                                       timeout=max(1000, (deadline - time.perf_counter()) * 1000))
                reached.append(True)
            except Exception:  # noqa: BLE001 - reported below
                reached.append(False)
        states = [page.locator("#run-state").inner_text() for page in pages]
        time.sleep(6)  # the ingester trims every 5 s
        sampling.set()
        memory_after = client.info("memory")["used_memory"]
        stream_length = client.xlen(stream_key(str(run.pk))) if client.exists(stream_key(str(run.pk))) else 0

        times = {number: (published.timestamp() * 1000, stored_at.timestamp() * 1000) for number, published, stored_at
                 in RunEvent.objects.filter(run=run).values_list("run_seq", "published_at", "stored_at")}
        lags, browser_lags, delivery_lags = [], [], []
        for page in pages:
            arrived = {int(number): when for number, when in page.evaluate("window.__arrived").items()}
            for number, handled_ms in page.evaluate("window.__handled"):
                if number in times:
                    lags.append((handled_ms - times[number][0]) / 1000)
                    browser_lags.append((handled_ms - times[number][1]) / 1000)
                    if number in arrived:
                        delivery_lags.append((arrived[number] - times[number][1]) / 1000)
        dead_letters = DeadLetter.objects.count()

        rate = stored / ingest_s
        baseline_rate = args.events / baseline_s
        mib = 1024 * 1024
        print(f"{args.events:,} rollout events + run_finished, {args.pages} Chromium pages watching")
        print(f"ingested: {stored:,} events in {ingest_s:.1f} s = {rate:,.0f} events/s; baseline, the same events "
              f"into Redis alone: {baseline_rate:,.0f} events/s; ratio {rate / baseline_rate:.3f}")
        print(f"Redis used_memory: start {memory_before / mib:.1f} MiB, peak {peak[0] / mib:.1f} MiB, end "
              f"{memory_after / mib:.1f} MiB (end/start {memory_after / memory_before:.2f}); stream length at the end "
              f"{stream_length}")
        if lags:
            print(f"browser lag, stored in PostgreSQL to handled by the page in order: p50 "
                  f"{statistics.median(browser_lags):.2f} s, p95 {percentile(browser_lags, 0.95):.2f} s, max "
                  f"{max(browser_lags):.2f} s over {len(browser_lags):,} (page, event) pairs")
            if delivery_lags:
                print(f"  of which delivery, stored until the page's WebSocket message event fired (the ingester's "
                      f"commit and forward, Channels, uvicorn, the socket, the page's event queue): p50 "
                      f"{statistics.median(delivery_lags):.2f} s, p95 {percentile(delivery_lags, 0.95):.2f} s "
                      f"({len(delivery_lags):,} (page, event) pairs came by WebSocket, the rest by the page's fetch)")
            print(f"end-to-end lag, published by the trainer to handled by the page (includes the ingester's "
                  f"backlog while the burst outruns it): p50 {statistics.median(lags):.2f} s, "
                  f"p95 {percentile(lags, 0.95):.2f} s, max {max(lags):.2f} s")
        print(f"pages that reached the last event: {sum(reached)}/{len(pages)}; their state: {', '.join(states)}; "
              f"dead letters: {dead_letters}")
        print("rerun: .venv/bin/python benchmarks/event_path_load.py")
        if stored != total or not all(reached) or dead_letters:
            print("FAILED: every event must be stored once and every page must reach the end")
            for process in processes:
                print(f"--- {process.name}\n{process.log_tail()}")
            return 1
        return 0
    finally:
        if browser is not None:
            browser.close()
        if playwright is not None:
            playwright.stop()
        viewer_stack.stop_everything(processes, services, root)


if __name__ == "__main__":
    raise SystemExit(main())
