"""Server time of the compare page with 20 runs of 500 steps each (issue 49): four groups of five seeds.

Goal: p95 under 150 ms on this machine, idle. The page is timed in-process through Django's test client (the whole
request: middleware, queries, the per-step means and bands, the noise verdicts, the template), as
viewer_page_latency.py times the run page, against the same view of four groups whose runs have no step yet (the
baseline, same process). Each step's metrics hold the trainer's ~40 figures (trainer/loop/driver.py's names),
nested ones included. A throwaway embedded PostgreSQL is started and removed.

Rerun:  .venv/bin/python benchmarks/compare_page_latency.py [--runs 20 --steps 500 --requests 40]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

import viewer_stack
from viewer_page_latency import GOAL_P95_MS, p95, time_view

GROUPS = 4


def step_values(rng: random.Random, step: int, level: float) -> dict:
    """One step's metrics, shaped as the trainer publishes them."""
    reward = min(1.0, max(0.0, level + step / 1000 + rng.gauss(0, 0.05)))
    values = {name: rng.random() for name in (
        "reward/first_attempt", "reward/retry", "lean/accuracy", "response_length/truncated_share",
        "learner/loss", "learner/grad_norm", "learner/clip_fraction", "learner/clip_low_fraction",
        "learner/clip_high_fraction", "learner/dual_clip_fraction", "learner/tokens_per_second",
        "rollout/logprob_abs_diff_mean", "rollout/logprob_abs_diff_max", "rollout/ratio_outside_share",
        "time/generation_s", "time/verification_tail_s", "time/verification_total_s", "time/learning_s",
        "time/weight_sync_s", "generation/tokens_per_second", "format_error_share", "verifier/cache_hit_rate")}
    values.update({"reward/mean": reward, "rollouts": 2048, "censored": 0, "standin_verdicts": 0,
                   "response_length/mean": 3000 + rng.random() * 500, "response_length/max": 8192,
                   "retries/added": rng.randrange(200), "retries/buffer_size": 5000, "learner/trained_sequences": 2048,
                   "format_errors": {"no_valid_think_block": rng.randrange(50), "no_lean_block": rng.randrange(20)},
                   "retries/dropped": {"over_budget": rng.randrange(5)},
                   "time/phases": {"generate": [0.0, 41.2], "verify": [41.2, 52.0], "learn": [52.0, 70.3]}})
    return values


def make_groups(owner, version, runs: int, steps: int, name: str) -> list[int]:
    from runs.models import Run, RunGroup, StepMetrics
    from trainer.config import RunConfig

    rng = random.Random(0)
    groups = [RunGroup.objects.create(owner=owner, name=f"{name} {index}", launch={"preset": "cpu-demo"}, grid={})
              for index in range(GROUPS)]
    for index in range(runs):
        group = groups[index % GROUPS]
        config = RunConfig.from_preset("cpu-demo", {"schedule": {"seed": index // GROUPS}}).to_json_dict()
        run = Run.objects.create(owner=owner, name=f"{group.name} seed {index // GROUPS}", promptset_version=version,
                                 preset="cpu-demo", config=config, state="succeeded", run_group=group)
        level = 0.2 + 0.05 * (index % GROUPS)
        StepMetrics.objects.bulk_create([StepMetrics(run=run, step=step, values=step_values(rng, step, level))
                                         for step in range(1, steps + 1)])
    return [group.pk for group in groups]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()

    os.environ.update(DJANGO_DEBUG="0", DJANGO_ALLOWED_HOSTS="testserver")  # DEBUG would record every query
    services, root = viewer_stack.start_services(with_redis=False)
    try:
        viewer_stack.set_up_django()
        from django.db import connection
        from django.test import Client

        owner, version = viewer_stack.make_owner_and_version()
        started = time.perf_counter()
        full = make_groups(owner, version, args.runs, args.steps, "full")
        empty = make_groups(owner, version, args.runs, 0, "empty")
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        print(f"seeded {args.runs} runs of {args.steps} steps in {time.perf_counter() - started:.0f} s")

        client = Client()
        client.force_login(owner)
        views = {
            "compare, 4 groups (20 runs), min–max band": "/runs/compare/?{}",
            "compare, ± std, each seed, EMA 0.6, window 20": "/runs/compare/?{}&band=std&seeds=1&smoothing=0.6&window=20",
            "compare, by generated tokens": "/runs/compare/?{}&axis=tokens&metric=lean/accuracy",
        }
        failed = False
        print(f"{'view':50} {'p95 (full)':>11} {'p95 (empty)':>12} {'ratio':>6} {'median (full)':>13}")
        for name, pattern in views.items():
            samples = time_view(client, pattern.format("&".join(f"groups={pk}" for pk in full)), args.requests)
            loaded, median = p95(samples), statistics.median(samples)
            baseline = p95(time_view(client, pattern.format("&".join(f"groups={pk}" for pk in empty)), args.requests))
            failed |= loaded > GOAL_P95_MS
            print(f"{name:50} {loaded:9.1f} ms {baseline:9.1f} ms {loaded / baseline:6.2f} {median:9.1f} ms"
                  f"{'' if loaded <= GOAL_P95_MS else f'  ABOVE the {GOAL_P95_MS:.0f} ms goal'}")
        print(f"goal: p95 under {GOAL_P95_MS:.0f} ms with {args.runs} runs of {args.steps} steps: "
              f"{'missed' if failed else 'met'}")
        print("rerun: .venv/bin/python benchmarks/compare_page_latency.py")
        return 1 if failed else 0
    finally:
        viewer_stack.stop_everything([], services, root)


if __name__ == "__main__":
    raise SystemExit(main())
