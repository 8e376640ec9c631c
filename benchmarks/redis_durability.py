"""What writing and fsyncing Redis's append-only file before each reply costs the trainer's events.

The platform runs Redis with ``--appendonly yes --appendfsync always`` (deploy/services.py ``REDIS_DURABILITY``):
what Redis acknowledged is on disk, so a killed Redis loses no event the trainer has let go of. Redis's default,
``everysec``, may acknowledge writes it has not written yet. This measures the price on this machine's disk: two
fresh redis-servers side by side in the same run, the platform's own command but for the fsync policy:

- **a run's burst**: ``--events`` events of ``--answer-chars`` characters (a rollout's size) through the trainer's own
  publisher and buffered sink (trainer.observability.events: up to 500 events a round trip), from the first publish
  until Redis has acknowledged the last: events per second, ``always`` against ``everysec``;
- **one event a round trip**: ``--single`` XADDs one after another, each waiting for its reply (the slowest case: an
  fsync each): median microseconds, ``always`` against ``everysec``.

Each policy is timed ``--repeats`` times, alternating; medians are printed.

Rerun:  .venv/bin/python benchmarks/redis_durability.py [--events 20000] [--single 2000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO)]

from deploy.services import RedisService, free_port  # noqa: E402 - once the repository is on the path


class RedisWithPolicy(RedisService):
    """The platform's Redis, its fsync policy replaced by ``policy``."""

    policy: str = "always"

    def command(self) -> list[str]:
        command = super().command()
        command[command.index("--appendfsync") + 1] = self.policy
        return command


def start(policy: str, root: Path) -> RedisWithPolicy:
    service = RedisWithPolicy(name=f"redis-{policy}", port=free_port(), log_dir=root / "logs",
                              data_dir=root / f"redis-{policy}")
    service.policy = policy
    service.start()
    return service


def burst_seconds(url: str, events: int, answer_chars: int, run_id: str) -> float:
    from trainer.observability.events import BufferedStreamSink, EventPublisher, EventType, RedisStreamSink

    sink = BufferedStreamSink(RedisStreamSink(url, run_id))
    publisher = EventPublisher(run_id, sink)
    text = "x" * answer_chars
    started = time.perf_counter()
    for index in range(events):
        publisher.publish(EventType.LOG, {"level": "info", "message": f"{index} {text}"})
    sink.close()
    return time.perf_counter() - started


def single_round_trip_seconds(url: str, count: int, key: str) -> float:
    import redis

    client = redis.Redis.from_url(url)
    seconds = []
    for index in range(count):
        started = time.perf_counter()
        client.xadd(key, {"event": str(index)})
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--answer-chars", type=int, default=2_000)
    parser.add_argument("--single", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()

    load_before = " ".join(f"{value:.2f}" for value in os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="redis-durability-") as folder:
        services = {policy: start(policy, Path(folder)) for policy in ("everysec", "always")}
        burst = {policy: [] for policy in services}
        single = {policy: [] for policy in services}
        try:
            for repeat in range(options.repeats):
                for policy, service in services.items():
                    burst[policy].append(burst_seconds(service.url, options.events, options.answer_chars,
                                                       f"{repeat}"))
                    single[policy].append(single_round_trip_seconds(service.url, options.single, f"one-{repeat}"))
        finally:
            for service in services.values():
                service.stop()

    load_after = " ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"two redis-servers side by side, {options.repeats} repeats alternating; load average {load_before} before, "
          f"{load_after} after")
    rates = {policy: options.events / statistics.median(times) for policy, times in burst.items()}
    round_trips = {policy: statistics.median(times) for policy, times in single.items()}
    for policy in services:
        print(f"  {policy:>8}: a burst of {options.events:,} events of {options.answer_chars:,} characters "
              f"{rates[policy]:,.0f} events/s; one event a round trip {round_trips[policy] * 1e6:,.0f} µs (median)")
    print(f"  always against everysec: the burst's rate {rates['always'] / rates['everysec']:.2f}×; one event a round "
          f"trip takes {round_trips['always'] / round_trips['everysec']:.1f}× as long")


if __name__ == "__main__":
    main()
