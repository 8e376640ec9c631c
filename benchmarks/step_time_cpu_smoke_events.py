"""A measured cpu-smoke run for the step-time model: its events are what ``step-time --preset cpu-smoke`` fits from.

One synchronous run (``rollout.max_staleness`` 0) of ``--steps`` steps of the cpu-smoke preset against the
stand-in Lean server at ``--latency-ms`` (issue 25's setting, 1500 ms), on four closed-arithmetic problems;
its events (stdout of ``python -m trainer run``) are written to ``--output``, and the load average before and
after is printed. A toy's run, and the one recorded: the untrained tiny random model (model.source tiny_random,
24-token answers, as cpu-smoke was when it was recorded), whose answers all fail the format check, so none
reaches Lean and the latency never shows. (cpu-smoke's own model now reaches Lean on the smoke promptset:
benchmarks/asynchronous_smoke.py.)

Rerun: .venv/bin/python benchmarks/step_time_cpu_smoke_events.py [--steps 6] [--latency-ms 1500]
       [--output docs/step-time/cpu-smoke-sync-events.jsonl]
       then: .venv/bin/python -m trainer step-time --calibrate docs/step-time/cpu-smoke-sync-events.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.__main__ import main as trainer_main
from trainer.verification.standin_server import StandinServerThread, StandinSettings

PROBLEMS = [(2, 3), (4, 5), (7, 1), (6, 6)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--latency-ms", type=float, default=1500.0)
    parser.add_argument("--output", default="docs/step-time/cpu-smoke-sync-events.jsonl")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as folder:
        promptset = Path(folder) / "problems.jsonl"
        promptset.write_text("".join(
            json.dumps({"problem_id": f"add{i}", "formal_statement": f"theorem add{i} : ({a} : ℕ) + {b} = {a + b} := by"}) + "\n"
            for i, (a, b) in enumerate(PROBLEMS)))
        printed = io.StringIO()
        with StandinServerThread(StandinSettings(latency_s=args.latency_ms / 1000)) as server, \
                contextlib.redirect_stdout(printed):
            code = trainer_main(["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output",
                                 str(Path(folder) / "run"), "--lean-url", server.url,
                                 "--set", f"schedule.total_steps={args.steps}", "--set", "model.source=tiny_random",
                                 "--set", "model.name_or_path=tiny-random-llama",
                                 "--set", "rollout.max_response_tokens=24"])
    # rollout_progress events are live text, never stored: the model does not read them.
    kept = [line for line in printed.getvalue().splitlines() if json.loads(line).get("type") != "rollout_progress"]
    Path(args.output).write_text("\n".join(kept) + "\n")
    print(f"load average after: {os.getloadavg()}; exit {code}; {len(kept)} events in {args.output}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
