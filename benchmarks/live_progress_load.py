"""The live path under load: 256 answers streaming at once, 2 progress events a second each, 3 pages watching.

The real path: trainer.observability.live's RedisLiveSink publishes ``rollout_progress`` on the run's pub/sub channel (and the
latest text in its writing hash), the forwarder (``manage.py forward_progress``, its own process) sends it to the
run's Channels group, and the ASGI server (uvicorn) to three WebSockets logged in as the run's owner. Meanwhile
the trainer publishes stored events (``rollout_finished``, ``--stored-per-s`` a second) on the durable stream,
which the ingester stores and forwards as always.

It measures, in one run, the same stored-event load twice: progress off, then progress on. It reports:
- the delay of stored events (published → received by each page), median and 95th percentile, and the ratio
  with progress on against off;
- the CPU share of the forwarder, the ingester and the web process (of one core), progress off and on;
- Redis's memory (used_memory) with progress off and on;
- the progress pieces the pages received against those published (pieces may be dropped by design).
The load is one process publishing for 256 answers (a trainer publishes at most ``events.progress_rollouts`` per
rank: 8 by default, so 256 is 32 ranks' worth). Figures are this machine's (see its load average, printed).

Rerun:  .venv/bin/python benchmarks/live_progress_load.py [--rollouts 256 --seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
import time

import viewer_stack


def cpu_seconds(pid: int) -> float:
    import psutil

    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def watch(url: str, cookie: str, origin: str, seconds: float, delays: list[float], pieces: list[int],
                prefix: str) -> None:
    import websockets

    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}, max_queue=None) as socket:
        deadline = time.time() + seconds
        while time.time() < deadline:
            try:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=max(0.01, deadline - time.time())))
            except asyncio.TimeoutError:
                break
            now = time.time()
            if message.get("type") == "progress":
                pieces[0] += len(message["pieces"])
            for event in message.get("events", []):
                if event["type"] == "rollout_finished" and event["payload"]["rollout_key"].startswith(prefix):
                    delays.append(now - float(event["payload"]["problem_name"]))  # the publish time rides along


def phase(port, run, cookie, args, *, with_progress: bool) -> dict:
    from django.conf import settings

    from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished
    from trainer.observability.live import LiveRollouts, RedisLiveSink

    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
    publisher.live = RedisLiveSink(settings.REDIS_URL, str(run.pk), max_queued=65536)
    stopping = threading.Event()
    published_pieces = [0]

    def stream_progress():
        live = LiveRollouts(publisher.publish_live, lambda p, s: (f"live-{p}", 0, f"p{p % 16}", "first"),
                            interval_s=0.5, max_rollouts=args.rollouts)
        texts = ["<think>\n"] * args.rollouts
        original = publisher.publish_live

        def counted(piece):
            published_pieces[0] += 1
            original(piece)

        live._publish = counted
        # The engine reports every decoding step; here every 0.1 s, 32 characters (~8 tokens) each time.
        while not stopping.is_set():
            started = time.monotonic()
            for index in range(args.rollouts):
                texts[index] += "then norm_num closes the goal. "
                live.update(index, 0, len(texts[index]) // 4, lambda index=index: texts[index])
            stopping.wait(max(0.0, 0.1 - (time.monotonic() - started)))

    def publish_stored():
        number = 0
        while not stopping.is_set():
            publisher.publish(EventType.ROLLOUT_FINISHED, RolloutFinished(
                rollout_key=f"load-{with_progress}-{number}", step=0, problem_id="p0", problem_name=repr(time.time()),
                reasoning="thinking " * 100, lean_code="theorem p : (2 : ℕ) + 3 = 5 := by\n  norm_num",
                verdict="valid", reward=1.0))
            number += 1
            stopping.wait(1 / args.stored_per_s)

    delays: list[float] = []
    received = [0]
    processes = {p.name: p.process.pid for p in port[1]}
    cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
    wall_started = time.monotonic()
    threads = [threading.Thread(target=publish_stored, daemon=True)]
    if with_progress:
        threads.append(threading.Thread(target=stream_progress, daemon=True))
    url = f"ws://127.0.0.1:{port[0]}/ws/runs/{run.pk}/events/?after=0"

    async def pages():
        await asyncio.gather(*(watch(url, cookie, f"http://127.0.0.1:{port[0]}", args.seconds + 3, delays, received,
                                     f"load-{with_progress}-")
                               for _ in range(3)))

    page_thread = threading.Thread(target=lambda: asyncio.run(pages()), daemon=True)
    page_thread.start()
    time.sleep(1)  # the sockets connect
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    import redis

    memory = redis.Redis.from_url(settings.REDIS_URL).info("memory")["used_memory"]
    stopping.set()
    for thread in threads:
        thread.join(10)
    page_thread.join(args.seconds + 10)
    wall = time.monotonic() - wall_started
    cpu = {name: (cpu_seconds(pid) - cpu_before[name]) / wall for name, pid in processes.items()}
    publisher.live.close()
    return {"delays": sorted(delays), "cpu": cpu, "redis_memory": memory, "pieces_received": received[0],
            "pieces_published": published_pieces[0], "dropped_by_sink": publisher.live.dropped}


def quantile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--stored-per-s", type=float, default=20.0)
    args = parser.parse_args()

    services, root = viewer_stack.start_services(with_redis=True)
    processes = []
    try:
        viewer_stack.set_up_django()
        from deploy.services import PlatformProcess

        owner, version = viewer_stack.make_owner_and_version()
        run = viewer_stack.make_run(owner, version, "live load", state="running")
        cookie = viewer_stack.session_cookie(owner)
        port, processes = viewer_stack.start_web_and_ingester(root)
        forwarder = PlatformProcess(name="progress-forwarder", port=0, log_dir=root / "logs", has_port=False,
                                    argv=[sys.executable, "manage.py", "forward_progress"])
        forwarder.start()
        processes.append(forwarder)
        time.sleep(2)  # the ingester creates the run's consumer group on its first poll
        watched = [p for p in processes if p.name in ("web", "ingester", "progress-forwarder")]

        off = phase((port, watched), run, cookie, args, with_progress=False)
        on = phase((port, watched), run, cookie, args, with_progress=True)
        load = os.getloadavg()
        print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (at the end)")
        print(f"load: {args.rollouts} answers streaming, a piece each every 0.5 s; {args.stored_per_s:g} stored "
              f"rollout_finished a second; 3 pages watching; {args.seconds:g} s per phase")
        for name, result in (("progress off", off), ("progress on ", on)):
            delays = result["delays"]
            print(f"{name}: stored-event delay median {statistics.median(delays) * 1000:.0f} ms, "
                  f"p95 {quantile(delays, 0.95) * 1000:.0f} ms over {len(delays)} receipts; CPU of one core: "
                  f"ingester {result['cpu']['ingester']:.1%}, forwarder {result['cpu']['progress-forwarder']:.1%}, "
                  f"web (uvicorn) {result['cpu']['web']:.1%}; "
                  f"Redis used_memory {result['redis_memory'] / 2**20:.1f} MiB")
        print(f"progress pieces: published {on['pieces_published']:,} ({on['pieces_published'] / args.seconds:,.0f}/s), "
              f"received by the 3 pages {on['pieces_received']:,} (of {3 * on['pieces_published']:,}), "
              f"dropped by the trainer's sink {on['dropped_by_sink']}")
        ratio_median = statistics.median(on["delays"]) / statistics.median(off["delays"])
        ratio_p95 = quantile(on["delays"], 0.95) / quantile(off["delays"], 0.95)
        print(f"stored-event delay, progress on ÷ off: median {ratio_median:.2f}×, p95 {ratio_p95:.2f}×")
        print("rerun: .venv/bin/python benchmarks/live_progress_load.py")
        return 0
    finally:
        viewer_stack.stop_everything(processes, services, root)


if __name__ == "__main__":
    raise SystemExit(main())
