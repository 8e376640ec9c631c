"""Asynchronous against synchronous RL on the cpu-demo, with Lean's long-tailed latency (the stand-in's).

The same steps of the cpu-demo preset (SmolLM2-135M warm-started by SFT, the demo promptset) run twice,
one after the other on this machine: rollout.max_staleness=0 (the release's synchronous loop) and
rollout.max_staleness=1 (one step off-policy: the next batch is generated and checked while the learner
updates). The stand-in Lean server draws each proof's time from a log-normal with a heavy tail plus a
share that runs to verifier.timeout_s, as Lean's do. Reported: each run's step time (first STEP_STARTED
to RUN_FINISHED, over the steps), their ratio, first-attempt training accuracy per step, and a picture
of both overlaid (docs/asynchronous-rl.png). The step-time model's prediction for the same inputs
(`python -m trainer step-time`) is printed beside it when that command exists.

    .venv/bin/python benchmarks/asynchronous_rl.py --steps 6

A toy's measurement: a 135M model on 2 CPU cores where the learner and the generator share the cores;
on GPUs they run on separate pools.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform"), str(REPO / "scripts")]

LATENCY = {"mean_s": 4.0, "sigma": 1.0, "timeout_share": 0.03, "seed": 11}


def timed_span(events_path: Path) -> tuple[float, int]:
    """Seconds from the first STEP_STARTED to RUN_FINISHED, and the steps in between."""
    first = finished = None
    steps = 0
    for line in events_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        if event["type"] == "step_started":
            first = first if first is not None else event["time"]
        elif event["type"] == "metrics":
            steps += 1
        elif event["type"] == "run_finished":
            finished = event["time"]
    return finished - first, steps


def main(argv: list[str] | None = None) -> int:
    import plot_demo_curve
    from trainer.verification.standin_server import LatencyDistribution, StandinSettings

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--data-dir", type=Path, default=REPO / "var")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "asynchronous-rl.png")
    parser.add_argument("--draw-only", action="store_true", help="Draw the runs already under DATA_DIR.")
    options = parser.parse_args(argv)
    work = options.data_dir / "asynchronous-rl"
    runs = {}
    for eta in (0, 1):
        events = work / f"eta{eta}" / "events.jsonl"
        if not options.draw_only:
            events.parent.mkdir(parents=True, exist_ok=True)
            print(f"η = {eta}: load average before {os.getloadavg()}", file=sys.stderr)
            plot_demo_curve.run_demo(options.data_dir, options.steps, events,
                                     [f"rollout.max_staleness={eta}", "verifier.timeout_s=20"],
                                     StandinSettings(latency=LatencyDistribution(**LATENCY)))
        runs[eta] = events
    spans = {eta: timed_span(events) for eta, events in runs.items()}
    for eta, (seconds, steps) in spans.items():
        print(f"η = {eta}: {steps} steps in {seconds:.0f} s, {seconds / steps:.1f} s a step")
    ratio = (spans[1][0] / spans[1][1]) / (spans[0][0] / spans[0][1])
    print(f"asynchronous / synchronous step time: {ratio:.2f} (stand-in latency {LATENCY}; load average now "
          f"{os.getloadavg()})")
    draw(runs, spans, options.out)
    print(f"wrote {options.out}")
    return 0


def draw(runs: dict[int, Path], spans: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import plot_demo_curve

    fig, axis = plt.subplots(figsize=(8, 4.5), dpi=120)
    for eta, color in ((0, "tab:blue"), (1, "tab:orange")):
        figures = plot_demo_curve.step_figures(runs[eta])
        seconds, steps = spans[eta]
        label = ("synchronous, η = 0" if eta == 0 else f"asynchronous, η = {eta}") + f": {seconds / steps:.0f} s a step"
        axis.plot([f["minutes"] for f in figures], [f["first_accuracy"] for f in figures], "o-", color=color, label=label)
    axis.set_xlabel("minutes since the run started (cpu-demo, SmolLM2-135M, 2 CPU cores; a toy's measurement)")
    axis.set_ylabel("training accuracy, first attempts")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"Asynchronous vs synchronous RL with the stand-in's long-tailed Lean latency\n"
                   f"(log-normal mean {LATENCY['mean_s']:g} s, σ {LATENCY['sigma']:g}, "
                   f"{LATENCY['timeout_share']:.0%} run to the 20 s timeout)", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


if __name__ == "__main__":
    sys.exit(main())
