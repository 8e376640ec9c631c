"""Prompt selection by history against uniform on the cpu-demo (issue 47): groups with signal per token, the time to
reach them, and the evaluation's accuracy at the end, as ratios of runs made one after the other on this machine.

For each seed, the same cpu-demo run (SmolLM2-135M warm-started by SFT, the demo promptset, the stand-in Lean server)
is made twice: ``data.selection=uniform`` (the baseline, the release's) then ``data.selection=history``
(trainer/loop/prompt_selection.py), each evaluated once at its last step. Reported, per seed and over the seeds:

- groups with signal per 1,000 generated tokens: the steps' ``batch/groups_with_signal`` shares times their groups,
  over every token generated in training (the goal: history ≥ 1.5× uniform);
- wall time to the same number of groups with signal: from the first step's start to the end of the step where
  the run's running count reached the smaller of the two runs' totals (history ÷ uniform; below 1 is faster);
- the evaluation's accuracy at the end (``mean@k``: the share of its samples Lean accepted): history − uniform,
  beside the spread of uniform's accuracy over the seeds (the goal: not worse beyond that spread).

    .venv/bin/python benchmarks/history_selection.py                       # 20 steps, seeds 0 and 1
    .venv/bin/python benchmarks/history_selection.py --steps 10 --seeds 0 1  # what fits a busy afternoon
    .venv/bin/python benchmarks/history_selection.py --preset cpu-smoke --steps 6 --set rollout.samples_per_prompt=4
    .venv/bin/python benchmarks/history_selection.py --earlier-run-seed 2  # history starts from an earlier run's

Beside them, from the uniform runs: the share of groups with signal by the streak their problem had before them
(GRESO's premise: a prompt with no signal in one epoch mostly has none in the next), and how many groups a problem
gets in the run's steps. A rule that skips by streak can raise signal per token only as far as the streak predicts
the next group and problems live long enough in the run to have one (``signal_by_streak``).

``--earlier-run-seed N`` measures the other half of the feature: a run that starts from the platform's history
(``prior_signal_less_streak``, the column an export writes from earlier runs) instead of from nothing. One uniform run of
seed N is made first, and every run of the pairs reads a promptset carrying each problem's history in it
(``prior_history``): the history runs start their streaks from it; the uniform runs ignore it by definition, so they
are the cold-start pairs' uniform runs to the token.

``--preset cpu-smoke`` is the reduced size: the tiny smoke model on its four problems (two always solved, one never,
one sometimes: trainer/sft/smoke_model.py), no warm start to build; a plumbing-sized measurement, not the cpu-demo's.

A toy's measurement: a 135M model on 2 shared CPU cores, 24 arithmetic problems that the stand-in decides; what it
shows is whether skipping signal-less problems buys signal per token, not what it buys a prover. The load average
is printed before each run: wall times on a shared machine are worth their ratio at best.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "platform"), str(REPO / "scripts")]

SELECTIONS = ("uniform", "history")
GOAL_SIGNAL_PER_TOKEN = 1.5


def read_events(events_path: Path) -> list[dict]:
    return [json.loads(line) for line in events_path.read_text().splitlines() if line.startswith("{")]


def run_figures(events: list[dict]) -> dict:
    """Per step: groups with signal (count), tokens generated in training, seconds since the first step started;
    the problems skipped; the last evaluation's mean accuracy; the engine that sampled."""
    tokens: dict[int, int] = {}
    first_started = None
    steps = []
    evaluation = None
    engine = None
    for event in events:
        payload = event["payload"]
        if event["type"] == "run_started":
            engine = (payload.get("rollout_engine") or {}).get("engine")
        elif event["type"] == "step_started" and first_started is None:
            first_started = event["time"]
        elif event["type"] == "rollout_finished" and not payload["is_evaluation"]:
            tokens[payload["step"]] = tokens.get(payload["step"], 0) + payload["num_tokens"]
        elif event["type"] == "metrics":
            values = payload["values"]
            groups = values["rollouts"] // max(1, _samples_per_prompt(events))
            share = values["batch/groups_with_signal"]
            steps.append({"step": payload["step"], "groups": groups,
                          "groups_with_signal": 0 if share is None else round(share * groups),
                          "tokens": tokens.get(payload["step"], 0), "seconds": event["time"] - first_started,
                          "skipped": values.get("data/problems_skipped")})
        elif event["type"] == "evaluation":
            evaluation = payload["values"]
    accuracy_name = next((name for name in sorted(evaluation or {}) if name.startswith("mean@")), None)
    return {"steps": steps, "engine": engine,
            "accuracy": evaluation[accuracy_name] if accuracy_name else None, "accuracy_name": accuracy_name}


def first_attempt_groups(events: list[dict]) -> dict[str, list[bool]]:
    """Each problem's training groups of first attempts in the order of their steps: whether each had signal, as
    the learner's advantages decide it (trainer/learning/group_signal.py). A group with no scored answer (Lean
    censored them all) is no evidence either way and is left out, as the selection's streaks leave it out."""
    import torch

    from trainer.learning.group_signal import groups_with_signal

    rewards: dict[tuple[int, str], list[float]] = {}
    for event in events:
        payload = event["payload"]
        if event["type"] != "rollout_finished" or payload["is_evaluation"] or payload["turn"] != "first":
            continue
        reward = float("nan") if payload["is_censored"] or payload["reward"] is None else float(payload["reward"])
        rewards.setdefault((payload["step"], payload["problem_id"]), []).append(reward)
    groups: dict[str, list[bool]] = {}
    for (_, problem_id), answers in sorted(rewards.items()):
        has_signal, has_scored = groups_with_signal(torch.tensor([answers], dtype=torch.float64))
        if bool(has_scored[0]):
            groups.setdefault(problem_id, []).append(bool(has_signal[0]))
    return groups


def prior_history(events: list[dict]) -> dict[str, dict]:
    """Problem id → the ``prior_*`` columns an export would write after this one run (platform/promptsets/export.py):
    its scored first attempts, of them the ones Lean (here the stand-in) accepted, and its groups without signal in a
    row at the run's end, counted back from the last."""
    attempts: dict[str, int] = {}
    solves: dict[str, int] = {}
    for event in events:
        payload = event["payload"]
        if (event["type"] != "rollout_finished" or payload["is_evaluation"] or payload["turn"] != "first"
                or payload["is_censored"] or payload["reward"] is None):
            continue
        attempts[payload["problem_id"]] = attempts.get(payload["problem_id"], 0) + 1
        solves[payload["problem_id"]] = solves.get(payload["problem_id"], 0) + (payload["verdict"] == "valid")
    prior = {}
    for problem_id, signals in first_attempt_groups(events).items():
        streak = next((count for count, has_signal in enumerate(reversed(signals)) if has_signal), len(signals))
        prior[problem_id] = {"prior_attempts": attempts[problem_id], "prior_solves": solves[problem_id],
                             "prior_signal_less_streak": streak}
    return prior


STREAKS = ("first visit", "0", "1", "2 or more")


def signal_by_streak(groups_by_problem: list[dict[str, list[bool]]]) -> dict:
    """From problems' successive groups (``first_attempt_groups`` of one or more runs): the share of groups with
    signal by the streak their problem had before them, the streak the selection keys on (its groups without signal
    in a row; "first visit" where it had no group yet), and how many groups a problem had on average. Where the share
    falls as the streak grows, skipping long streaks finds signal; where it does not, or where few problems reach a
    streak in the run's steps, history has little to go on."""
    counts = {streak: [0, 0] for streak in STREAKS}  # groups, of which with signal
    problems = 0
    for runs in groups_by_problem:
        for signals in runs.values():
            problems += 1
            streak = None
            for has_signal in signals:
                bucket = STREAKS[0] if streak is None else STREAKS[min(streak, 2) + 1]
                counts[bucket][0] += 1
                counts[bucket][1] += has_signal
                streak = 0 if has_signal else (streak or 0) + 1
    return {
        "by_streak": {streak: {"groups": groups, "with_signal": with_signal,
                               "share": with_signal / groups if groups else None}
                      for streak, (groups, with_signal) in counts.items()},
        "groups_per_problem": sum(groups for groups, _ in counts.values()) / problems if problems else None,
    }


def _samples_per_prompt(events: list[dict]) -> int:
    started = next(event for event in events if event["type"] == "run_started")
    return started["payload"]["config"]["rollout"]["samples_per_prompt"]


def seconds_to_reach(steps: list[dict], groups_with_signal: int) -> float | None:
    """Seconds from the first step's start to the end of the step where the running count reached the number."""
    reached = 0
    for step in steps:
        reached += step["groups_with_signal"]
        if reached >= groups_with_signal:
            return step["seconds"]
    return None


def compare(figures: dict[str, dict]) -> dict:
    """One seed's ratios of history to uniform."""
    totals = {name: {"signal": sum(s["groups_with_signal"] for s in run["steps"]),
                     "tokens": sum(s["tokens"] for s in run["steps"])} for name, run in figures.items()}
    per_1000 = {name: 1000 * total["signal"] / total["tokens"] if total["tokens"] else None
                for name, total in totals.items()}
    target = min(total["signal"] for total in totals.values())
    times = {name: seconds_to_reach(run["steps"], target) if target else None for name, run in figures.items()}
    return {
        "groups_with_signal": {name: total["signal"] for name, total in totals.items()},
        "tokens": {name: total["tokens"] for name, total in totals.items()},
        "signal_per_1000_tokens": per_1000,
        "signal_per_token_ratio": (per_1000["history"] / per_1000["uniform"]
                                   if per_1000["uniform"] and per_1000["history"] is not None else None),
        "same_signal_target": target,
        "seconds_to_target": times,
        "time_ratio": (times["history"] / times["uniform"] if times["uniform"] and times["history"] is not None
                       else None),
        "accuracy": {name: run["accuracy"] for name, run in figures.items()},
        "problems_skipped": sum(s["skipped"] or 0 for s in figures["history"]["steps"]),
        "engine": {name: run["engine"] for name, run in figures.items()},
    }


def run_once(preset: str, data_dir: Path, steps: int, events_path: Path, overrides: list[str],
             prior: dict[str, dict] | None = None) -> None:
    """One run of ``preset`` with ``overrides``, its events written to ``events_path``; its promptset carries
    ``prior`` (``prior_history``) where given."""
    if preset == "cpu-demo":
        import plot_demo_curve

        plot_demo_curve.run_demo(data_dir, steps, events_path, overrides, prior_history=prior)
        return
    from trainer.sft.smoke_model import write_smoke_promptset
    from trainer.verification.standin_server import StandinServerThread

    promptset = events_path.parent / "smoke.jsonl"
    write_smoke_promptset(promptset, prior_history=prior)
    with StandinServerThread() as standin, events_path.open("w") as events:
        command = [sys.executable, "-m", "trainer", "run", "--preset", preset, "--set", f"schedule.total_steps={steps}",
                   "--set", "schedule.checkpoint_every=0",
                   *[argument for override in overrides for argument in ("--set", override)],
                   "--lean-url", standin.url, "--promptset", str(promptset), "--output", str(events_path.parent / "run")]
        print("running:", " ".join(command), file=sys.stderr)
        subprocess.run(command, cwd=REPO, stdout=events, check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", choices=("cpu-demo", "cpu-smoke"), default="cpu-demo")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                        help="More settings for both runs of every seed.")
    parser.add_argument("--data-dir", type=Path, default=REPO / "var")
    parser.add_argument("--earlier-run-seed", type=int, default=None, metavar="N",
                        help="First make a uniform run of seed N; every pair's promptset then carries its history "
                             "(the history runs start from it). Default: no earlier run, every streak starts at 0.")
    parser.add_argument("--read-only", action="store_true", help="Compare the runs already under DATA_DIR.")
    options = parser.parse_args(argv)
    if options.earlier_run_seed is not None and options.earlier_run_seed in options.seeds:
        parser.error(f"--earlier-run-seed {options.earlier_run_seed} is one of --seeds: the earlier run would be the "
                     "uniform run it is compared with; choose a seed outside them")
    work = options.data_dir / "history-selection" / options.preset
    prior = None
    if options.earlier_run_seed is not None:
        earlier = work / f"earlier-seed{options.earlier_run_seed}-uniform" / "events.jsonl"
        if not options.read_only:
            earlier.parent.mkdir(parents=True, exist_ok=True)
            print(f"earlier run, seed {options.earlier_run_seed}: load average before {os.getloadavg()}", file=sys.stderr)
            run_once(options.preset, options.data_dir, options.steps, earlier, [
                *options.overrides, "data.selection=uniform", f"schedule.seed={options.earlier_run_seed}",
                "schedule.eval_every=0"])
        prior = prior_history(read_events(earlier))
        work = work / f"after-seed{options.earlier_run_seed}"
        print(f"the earlier run's history: {json.dumps(prior, sort_keys=True)}")
    per_seed = {}
    uniform_groups = []
    for seed in options.seeds:
        figures = {}
        for selection in SELECTIONS:
            events = work / f"seed{seed}-{selection}" / "events.jsonl"
            if not options.read_only:
                events.parent.mkdir(parents=True, exist_ok=True)
                print(f"seed {seed}, {selection}: load average before {os.getloadavg()}", file=sys.stderr)
                # Evaluated once, at the last step (run_demo turns evaluation off; a later --set wins).
                run_once(options.preset, options.data_dir, options.steps, events, [
                    *options.overrides, f"data.selection={selection}", f"schedule.seed={seed}",
                    f"schedule.eval_every={options.steps}"], prior)
            run_events = read_events(events)
            figures[selection] = run_figures(run_events)
            if selection == "uniform":
                uniform_groups.append(first_attempt_groups(run_events))
        per_seed[seed] = compare(figures)
        print(f"seed {seed}: {json.dumps(per_seed[seed])}")

    def spread(values):
        values = [value for value in values if value is not None]
        return (max(values) - min(values)) if len(values) > 1 else None

    def mean(values):
        values = [value for value in values if value is not None]
        return statistics.fmean(values) if values else None

    signal_ratio = mean(result["signal_per_token_ratio"] for result in per_seed.values())
    time_ratio = mean(result["time_ratio"] for result in per_seed.values())
    accuracy = {name: [result["accuracy"][name] for result in per_seed.values()] for name in SELECTIONS}
    uniform_spread = spread(accuracy["uniform"])
    accuracy_difference = (mean(accuracy["history"]) - mean(accuracy["uniform"])
                           if mean(accuracy["history"]) is not None and mean(accuracy["uniform"]) is not None else None)
    start = ("every streak from 0" if prior is None
             else f"history started from an earlier uniform run of seed {options.earlier_run_seed}")
    print(f"{options.steps} steps, seeds {options.seeds}, {options.preset} {options.overrides} on {sorted({e for r in per_seed.values() for e in r['engine'].values() if e})}, {start}")
    print(f"groups with signal per 1,000 generated tokens, history / uniform: "
          f"{_number(signal_ratio)}× (goal ≥ {GOAL_SIGNAL_PER_TOKEN}×: {_goal(signal_ratio, GOAL_SIGNAL_PER_TOKEN)})")
    print(f"wall time to the same number of groups with signal, history / uniform: {_number(time_ratio)}×")
    print(f"evaluation accuracy at the end (mean@k): uniform {accuracy['uniform']}, history {accuracy['history']}; "
          f"history − uniform {_number(accuracy_difference)}, uniform's spread over the seeds {_number(uniform_spread)} "
          f"({_not_worse(accuracy_difference, uniform_spread)})")
    by_streak = signal_by_streak(uniform_groups)
    print("uniform runs' groups with signal by their problem's streak before them (groups without signal in a row): "
          + "; ".join(f"{streak}: {_share(counts)}" for streak, counts in by_streak["by_streak"].items())
          + f"; {_number(by_streak['groups_per_problem'])} groups per problem")
    print(f"load average now {os.getloadavg()}")
    return 0


def _number(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.2f}"


def _percent(share: float | None) -> str:
    return "not measured" if share is None else f"{100 * share:.0f}%"


def _share(counts: dict) -> str:
    return f"{counts['with_signal']} of {counts['groups']} ({_percent(counts['share'])})"


def _goal(ratio: float | None, goal: float) -> str:
    return "not measured" if ratio is None else ("met" if ratio >= goal else "not met")


def _not_worse(difference: float | None, spread: float | None) -> str:
    if difference is None or spread is None:
        return "not measured: needs two seeds and both evaluations"
    return "not worse beyond the spread" if difference >= -spread else "worse beyond the spread"


if __name__ == "__main__":
    sys.exit(main())
