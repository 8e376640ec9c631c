"""Draw docs/demo-curve.png: a cpu-demo RL run on the demo promptset, starting from the warm start.

Per training step: the share of well-formed answers (the format check passed) and the
training accuracy (the share of the step's scored answers that Lean, here the stand-in, accepted),
for first attempts and for all answers (retry turns included), plus the wall time of each step.
Training accuracy is not an evaluation (no held-out problems, one sample per draw), and it leaves
censored answers out (the stand-in's "cannot decide", an outage): how many were censored is printed
per step and quoted on the picture beside the accuracy (censored_share).

Rerun everything (builds the warm start if needed, about 3 minutes on 2 idle cores, then the run):

    .venv/bin/python scripts/plot_demo_curve.py --steps 20

or only draw an earlier run's events (JSON lines from ``python -m trainer run --events stdout``):

    .venv/bin/python scripts/plot_demo_curve.py --events var/demo-curve/events.jsonl
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform")]


def write_demo_promptset(path: Path, prior_history: dict[str, dict] | None = None) -> None:
    """The demo promptset (platform/promptsets/demo.py, plain data) in the trainer's export format; with
    ``prior_history`` (problem id → its ``prior_*`` columns), the columns an export writes from earlier runs."""
    from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS, DEMO_SOURCE

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for problem in DEMO_PROBLEMS:
            out.write(json.dumps({
                "problem_id": problem.key, "formal_statement": problem.formal_statement,
                "informal_statement": problem.informal_statement, "name": problem.key,
                "header": DEMO_HEADER, "source": DEMO_SOURCE, **(prior_history or {}).get(problem.key, {}),
            }, ensure_ascii=False) + "\n")


def run_demo(data_dir: Path, steps: int, events_path: Path, overrides: list[str], standin_settings=None,
             prior_history: dict[str, dict] | None = None) -> None:
    """Warm start (cached), the stand-in on a free port (``standin_settings``: its latency), then
    ``python -m trainer run`` with the cpu-demo preset on the demo promptset (with ``prior_history``'s columns)."""
    from deploy.warm_start import build_warm_start
    from trainer.verification.standin_server import StandinServerThread, StandinSettings

    model = build_warm_start(data_dir)
    work = events_path.parent
    promptset = work / "demo.jsonl"
    write_demo_promptset(promptset, prior_history)
    with StandinServerThread(standin_settings or StandinSettings()) as standin, events_path.open("w") as events:
        command = [
            sys.executable, "-m", "trainer", "run", "--preset", "cpu-demo",
            "--set", f"model.init_checkpoint={model}", "--set", f"schedule.total_steps={steps}",
            # Per-step training figures are what is drawn; evaluation would double the time.
            "--set", "schedule.eval_every=0", "--set", "schedule.checkpoint_every=0",
            *[argument for override in overrides for argument in ("--set", override)],
            "--lean-url", standin.url, "--promptset", str(promptset), "--output", str(work / "run"), "--run-id", "demo",
        ]
        print("running:", " ".join(command), file=sys.stderr)
        subprocess.run(command, cwd=REPO, stdout=events, check=True)


def step_figures(events_path: Path) -> list[dict]:
    """Per step: well-formed share and accuracy (first attempts, all answers), answers, seconds."""
    rollouts: dict[int, list[dict]] = defaultdict(list)
    started: dict[int, float] = {}
    finished: dict[int, float] = {}
    run_started = None
    for line in events_path.read_text().splitlines():
        if not line.startswith("{"):
            continue
        event = json.loads(line)
        payload = event["payload"]
        if event["type"] == "run_started":
            run_started = event["time"]
        elif event["type"] == "rollout_finished" and not payload.get("is_evaluation"):
            rollouts[payload["step"]].append(payload)  # training accuracy: an evaluation's samples never count
        elif event["type"] == "step_started":
            started[payload["step"]] = event["time"]
        elif event["type"] == "metrics":
            finished[payload["step"]] = event["time"]

    def shares(answers: list[dict]) -> tuple[float | None, float | None]:
        if not answers:
            return None, None
        well_formed = sum(answer["format_error"] is None for answer in answers) / len(answers)
        scored = [answer for answer in answers if not answer["is_censored"]]
        accepted = sum((answer["reward"] or 0) > 0 for answer in scored) / len(scored) if scored else None
        return well_formed, accepted

    figures = []
    for step in sorted(finished):
        answers = rollouts[step]
        first = [answer for answer in answers if answer["turn"] == "first"]
        first_formed, first_accuracy = shares(first)
        all_formed, all_accuracy = shares(answers)
        figures.append({
            "step": step, "answers": len(answers), "first_attempts": len(first),
            "first_well_formed": first_formed, "first_accuracy": first_accuracy,
            "all_well_formed": all_formed, "all_accuracy": all_accuracy,
            "censored": sum(answer["is_censored"] for answer in answers),
            "seconds": finished[step] - started.get(step, finished[step]),
            # Wall time from the run's start (model loading included) to the end of this step.
            "minutes": (finished[step] - (run_started if run_started is not None else min(started.values()))) / 60,
        })
    return figures


def compute_dtype_chosen(events_path: Path) -> str | None:
    """The precision the run computed in, as its run_started event says (model.dtype auto is resolved per CPU)."""
    for line in events_path.read_text().splitlines():
        if line.startswith("{") and (event := json.loads(line))["type"] == "run_started":
            return (event["payload"].get("compute_dtype") or {}).get("dtype")
    return None


def censored_share(figures: list[dict]) -> tuple[int, int]:
    """(censored answers, all answers) over the run: what the training accuracy leaves out."""
    return sum(figure["censored"] for figure in figures), sum(figure["answers"] for figure in figures)


def censored_words(figures: list[dict]) -> str:
    censored, answers = censored_share(figures)
    share = censored / answers if answers else 0.0
    return f"censored, left out of the accuracy: {censored} of {answers} answers ({share:.1%})"


def rolling_mean(values: list[float | None], window: int) -> list[float | None]:
    """Mean of the last ``window`` known values at each point (fewer at the start)."""
    means = []
    for index in range(len(values)):
        recent = [value for value in values[max(0, index - window + 1) : index + 1] if value is not None]
        means.append(sum(recent) / len(recent) if recent else None)
    return means


def plot(figures: list[dict], out: Path, title: str, window: int = 3) -> None:
    """Each step a faint point at the minute it ended; lines are means over the last ``window`` steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [figure["minutes"] for figure in figures]
    fig, axis = plt.subplots(figsize=(8, 4.5), dpi=120)
    series = [
        ("first_well_formed", "well-formed, first attempts", "tab:blue", "-"),
        ("first_accuracy", "training accuracy: accepted by the stand-in, first attempts", "tab:green", "-"),
        ("all_accuracy", "training accuracy, all answers (retries too)", "tab:green", ":"),
    ]
    for key, label, color, style in series:
        values = [figure[key] for figure in figures]
        if style == "-":
            axis.plot(minutes, values, "o", color=color, alpha=0.3, markersize=4)
        axis.plot(minutes, rolling_mean(values, window), style, color=color, linewidth=2,
                  label=f"{label} (mean of {window} steps)")
    axis.set_xlabel(f"minutes since the run started on 2 CPU cores (each point one RL step of "
                    f"{figures[0]['answers']} answers)")
    axis.set_ylabel("share of answers")
    axis.set_ylim(-0.02, 1.02)
    axis.set_xlim(left=0)
    axis.set_title(f"{title}\n{censored_words(figures)}", fontsize=9)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=Path, default=None, help="Draw this run's events instead of running one.")
    parser.add_argument("--data-dir", type=Path, default=REPO / "var", help="Where the warm start is cached (default ./var).")
    parser.add_argument("--steps", type=int, default=20, help="RL steps to run (default 20).")
    parser.add_argument("--work-dir", type=Path, default=None,
                        help="Where the run and its events go (default DATA_DIR/demo-curve).")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="Override a cpu-demo setting, as `python -m trainer run --set` does; repeatable.")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "demo-curve.png")
    options = parser.parse_args(argv)
    events_path = options.events
    if events_path is None:
        events_path = (options.work_dir or options.data_dir / "demo-curve") / "events.jsonl"
        events_path.parent.mkdir(parents=True, exist_ok=True)
        run_demo(options.data_dir, options.steps, events_path, options.overrides)
    figures = step_figures(events_path)
    if not figures:
        print(f"no finished steps in {events_path}", file=sys.stderr)
        return 1
    print("step  answers  first: well-formed  accuracy   all: well-formed  accuracy  censored  seconds  minutes")
    for figure in figures:
        def show(value):
            return "  -  " if value is None else f"{value:5.2f}"
        print(f"{figure['step']:4d}  {figure['answers']:7d}  {show(figure['first_well_formed']):>18}  "
              f"{show(figure['first_accuracy']):>8}   {show(figure['all_well_formed']):>16}  "
              f"{show(figure['all_accuracy']):>8}  {figure['censored']:8d}  {figure['seconds']:7.0f}  {figure['minutes']:7.1f}")
    print(f"training accuracy counts scored answers only; {censored_words(figures)}")
    precision = compute_dtype_chosen(events_path)
    plot(figures, options.out, "cpu-demo preset: SmolLM2-135M warm-started by SFT, Dr.GRPO on the demo promptset"
         + (f", computing in {precision}" if precision else ""))
    print(f"wrote {options.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
