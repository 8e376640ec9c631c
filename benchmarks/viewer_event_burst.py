"""A burst of 2,048 rollout events (one step of the recipe) from the trainer to a watching browser's socket.

The real path: trainer.observability.events publishes to the run's Redis Stream, the ingester (its own
process) stores the events in PostgreSQL and forwards them through the Channels layer, and the
ASGI server (uvicorn) sends them on the run's WebSocket to a client logged in as the run's owner.
It prints how long the burst took to arrive, checks that none was lost or repeated, and compares
the time with the baseline of publishing the same burst into Redis alone, measured in the same run.

Rerun:  .venv/bin/python benchmarks/viewer_event_burst.py [--events 2048]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import viewer_stack


async def receive_burst(url: str, cookie: str, origin: str, expected: int, publish, timeout_s: float) -> tuple[list[str], float, float]:
    import websockets

    keys: list[str] = []
    async with websockets.connect(url, additional_headers={"Cookie": cookie, "Origin": origin}, max_queue=None) as socket:
        started = time.perf_counter()
        publish_seconds = await asyncio.to_thread(publish)
        deadline = started + timeout_s
        while len(keys) < expected and time.perf_counter() < deadline:
            try:
                message = json.loads(await asyncio.wait_for(socket.recv(), timeout=deadline - time.perf_counter()))
            except asyncio.TimeoutError:
                break
            keys.extend(event["payload"]["rollout_key"] for event in message.get("events", [])
                        if event["type"] == "rollout_finished")
        return keys, time.perf_counter() - started, publish_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2048)
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args()

    services, root = viewer_stack.start_services(with_redis=True)
    processes = []
    try:
        viewer_stack.set_up_django()
        from django.conf import settings

        from trainer.observability.events import EventPublisher, EventType, RedisStreamSink, RolloutFinished

        owner, version = viewer_stack.make_owner_and_version()
        run = viewer_stack.make_run(owner, version, "burst", state="running")
        cookie = viewer_stack.session_cookie(owner)

        port, processes = viewer_stack.start_web_and_ingester(root)
        time.sleep(2)  # the ingester creates the run's consumer group on its first poll

        def publish() -> float:
            publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
            started = time.perf_counter()
            for index in range(args.events):
                publisher.publish(EventType.ROLLOUT_FINISHED, RolloutFinished(
                    rollout_key=f"s0-r{index}", step=0, problem_id=f"p{index % 256}", reasoning="thinking " * 100,
                    lean_code="theorem p : (2 : ℕ) + 3 = 5 := by\n  norm_num", verdict="valid", reward=1.0))
            return time.perf_counter() - started

        url = f"ws://127.0.0.1:{port}/ws/runs/{run.pk}/events/?after=0"
        keys, seconds, publish_seconds = asyncio.run(
            receive_burst(url, cookie, f"http://127.0.0.1:{port}", args.events, publish, args.timeout))
        expected = {f"s0-r{index}" for index in range(args.events)}
        lost = len(expected - set(keys))
        repeated = len(keys) - len(set(keys))
        print(f"{args.events:,} rollout events: trainer → Redis → ingester → PostgreSQL → Channels → WebSocket in {seconds:.2f} s "
              f"({args.events / seconds:,.0f} events/s); lost {lost}, repeated {repeated}")
        print(f"baseline, publishing the burst into Redis alone: {publish_seconds:.2f} s; ratio {seconds / publish_seconds:.1f}×")
        print("rerun: .venv/bin/python benchmarks/viewer_event_burst.py")
        if lost or repeated:
            print("FAILED: every event must arrive exactly once")
            for process in processes:
                print(f"--- {process.name}\n{process.log_tail()}")
            return 1
        return 0
    finally:
        viewer_stack.stop_everything(processes, services, root)


if __name__ == "__main__":
    raise SystemExit(main())
