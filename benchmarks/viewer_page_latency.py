"""Server time of the run page, of a filtered rollout list and of its text search with 100,000 stored rollouts.

Goals: p95 under 150 ms for the page and the filtered lists (issue 5); under 200 ms for the text search over
the answers and Lean's messages (issue 35, PostgreSQL's full-text index). Each view is timed in-process through Django's test
client (the whole request: middleware, queries, template) on a run holding ``--rollouts``
rollouts, against the same view on an empty run in the same process as the baseline. A
throwaway embedded PostgreSQL is started and removed.

Rerun:  .venv/bin/python benchmarks/viewer_page_latency.py [--rollouts 100000 --requests 60]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import viewer_stack

GOAL_P95_MS = 150.0
TEXT_SEARCH_GOAL_P95_MS = 200.0


def p95(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=20, method="inclusive")[-1]


def time_view(client, url: str, requests: int) -> list[float]:
    for _ in range(3):  # warm caches, templates and the connection
        assert client.get(url).status_code == 200, url
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(url)
        samples.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()

    os.environ.update(DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="testserver")  # DEBUG would record every query
    services, root = viewer_stack.start_services(with_redis=False)
    try:
        viewer_stack.set_up_django()
        from django.db import connection
        from django.test import Client

        owner, version = viewer_stack.make_owner_and_version()
        big = viewer_stack.make_run(owner, version, "big")
        empty = viewer_stack.make_run(owner, version, "empty")
        started = time.perf_counter()
        viewer_stack.seed_attempts(big, args.rollouts)
        viewer_stack.seed_history(big, steps=max(1, args.rollouts // 2048))
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print(f"seeded {args.rollouts:,} rollouts in {time.perf_counter() - started:.0f} s")

        client = Client()
        client.force_login(owner)
        views = {
            "run page": "/runs/{}/",
            "run page, filtered (verdict=valid, turn=retry)": "/runs/{}/?verdict=valid&turn=retry",
            "rollout list API, filtered (format error, problem)": "/api/proofs/runs/{}/rollouts?format_error=no_valid_think_block&problem=p7",
            "rollout list API, filtered (step, reward=censored)": "/api/proofs/runs/{}/rollouts?step=20&reward=censored",
            "text search, a rare lemma name (1 in 200)": "/api/proofs/runs/{}/rollouts?text=Nat.succ_le_of_lt",
            "text search, two tactics and not a third": "/api/proofs/runs/{}/rollouts?text=nlinarith+gcongr+-omega",
            "text search, Lean's message words": "/api/proofs/runs/{}/rollouts?text=%22simp+failed%22",
            "run page, text search and step range": "/runs/{}/?text=positivity&step_from=10&step_to=20",
        }
        failed = False
        print(f"{'view':55} {'p95 (full)':>11} {'p95 (empty)':>12} {'ratio':>6}")
        for name, pattern in views.items():
            loaded = p95(time_view(client, pattern.format(big.pk), args.requests))
            baseline = p95(time_view(client, pattern.format(empty.pk), args.requests))
            goal = TEXT_SEARCH_GOAL_P95_MS if "text" in pattern else GOAL_P95_MS
            failed |= loaded > goal
            print(f"{name:55} {loaded:9.1f} ms {baseline:9.1f} ms {loaded / baseline:6.2f}"
                  f"{'' if loaded <= goal else f'  ABOVE the {goal:.0f} ms goal'}")
        print(f"goals: p95 under {GOAL_P95_MS:.0f} ms, text searches under {TEXT_SEARCH_GOAL_P95_MS:.0f} ms, "
              f"with {args.rollouts:,} rollouts: {'missed' if failed else 'met'}")
        print("rerun: .venv/bin/python benchmarks/viewer_page_latency.py")
        return 1 if failed else 0
    finally:
        viewer_stack.stop_everything([], services, root)


if __name__ == "__main__":
    raise SystemExit(main())
