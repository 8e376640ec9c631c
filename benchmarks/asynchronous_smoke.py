"""Issue 25's smoke check: cpu-smoke with rollout.max_staleness 1 against 0, Lean at 1,500 ms a proof.

One invocation runs both, one after the other on this machine, against one stand-in Lean server that
holds every proof ``--latency-ms`` (1,500 ms):

    python -m trainer run --preset cpu-smoke --promptset SMOKE --set rollout.max_staleness=η
        --set schedule.total_steps=6 --set verifier.cache_size=0 --lean-url STANDIN

for η = 0 and η = 1, on the smoke promptset (trainer/sft/smoke_model.py) that the cpu-smoke model knows by
heart. ``verifier.cache_size=0`` because that model's answers repeat: with the verdict cache on, every
proof after the first few is answered from memory and never waits for Lean, and there would be nothing
to overlap. Each run is timed from its first STEP_STARTED event to RUN_FINISHED. Reported: both spans
and their ratio (the issue asks for at most 0.75), the share of each run's answers that reached Lean,
the rollouts each trained on, and the load average.

    .venv/bin/python benchmarks/asynchronous_smoke.py [--steps 6] [--latency-ms 1500]

A toy's measurement: a two-layer model of width 64 on this machine's CPU cores; the ratio says how much
of Lean's time the loop hides, not what a GPU run gains (see `python -m trainer step-time`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def run_smoke(eta: int, steps: int, promptset: Path, lean_url: str, output: Path) -> list[dict]:
    command = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
               "--output", str(output), "--lean-url", lean_url, "--set", f"rollout.max_staleness={eta}",
               "--set", f"schedule.total_steps={steps}", "--set", "verifier.cache_size=0"]
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if finished.returncode != 0:
        raise SystemExit(f"η = {eta}: the run failed (exit {finished.returncode}):\n{finished.stderr[-3000:]}")
    return [json.loads(line) for line in finished.stdout.splitlines() if line.startswith("{")]


def summary(events: list[dict]) -> dict:
    started = next(event["time"] for event in events if event["type"] == "step_started")
    ended = next(event["time"] for event in events if event["type"] == "run_finished")
    answers = [event["payload"] for event in events
               if event["type"] == "rollout_finished" and not event["payload"].get("is_evaluation")]
    metrics = [event["payload"]["values"] for event in events if event["type"] == "metrics"]
    return {
        "seconds": ended - started,
        "answers": len(answers),
        "reached_lean": sum(answer["format_error"] is None for answer in answers),
        "rewarded": sum(answer["reward"] == 1.0 for answer in answers),
        "retries": sum(answer["turn"] == "retry" for answer in answers),
        "trained_rollouts": sum(values.get("rollouts", 0) or 0 for values in metrics),
        "staleness_max": max((values.get("rollout/staleness_max") or 0) for values in metrics),
    }


def main(argv: list[str] | None = None) -> int:
    from trainer.sft.smoke_model import build_smoke_model, write_smoke_promptset
    from trainer.verification.standin_server import StandinServerThread, StandinSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--latency-ms", type=float, default=1500.0)
    options = parser.parse_args(argv)
    build_smoke_model()  # built before the clock starts: a run would otherwise build it inside its first span
    results = {}
    with tempfile.TemporaryDirectory() as work, \
            StandinServerThread(StandinSettings(latency_s=options.latency_ms / 1000.0)) as standin:
        promptset = Path(work) / "smoke.jsonl"
        write_smoke_promptset(promptset)
        for eta in (0, 1):
            print(f"η = {eta}: load average before {os.getloadavg()}", file=sys.stderr)
            results[eta] = summary(run_smoke(eta, options.steps, promptset, standin.url, Path(work) / f"eta{eta}"))
    for eta, figures in results.items():
        print(f"η = {eta}: {options.steps} steps in {figures['seconds']:.2f} s; {figures['reached_lean']} of "
              f"{figures['answers']} answers reached Lean ({figures['rewarded']} earned 1, {figures['retries']} were "
              f"retries); {figures['trained_rollouts']} rollouts trained; staleness max {figures['staleness_max']}")
    print(f"asynchronous / synchronous time: {results[1]['seconds'] / results[0]['seconds']:.2f} (Lean at "
          f"{options.latency_ms:.0f} ms a proof; load average now {os.getloadavg()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
