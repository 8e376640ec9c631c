"""A cpu-demo expert-iteration pipeline end to end through the platform (issue 48): what each iteration harvested,
what its SFT and RL runs did, and what the held-out benchmark solved, with the stand-in Lean's verdicts.

It starts the whole stack as ``make run`` does (``deploy.stack.Stack``: PostgreSQL, Redis, a Ray head, the stand-in
Lean server, the web server, a Celery worker, the ingester and the sweeper), on free ports, with a fresh database, in
``--data-dir`` (kept between reruns: only the warm start and the compile caches, which the stack builds there once,
the first time for many minutes; the databases, logs and artifacts are removed first). Then, through the API as the
demo account: the demo promptset split once by the platform's own ``split`` curation into a training version and a
statement-disjoint held-out version (marked a benchmark), a ``cpu-demo`` pipeline launched on the two, and its page
(``GET /api/pipelines/<id>``) read until it ends. The table holds, per iteration, the proofs harvested, the corpus
size and what the contamination guard refused, the SFT and RL runs' steps and wall times, the RL promptset's size
and the benchmark's pass@k. Every verdict is the stand-in Lean server's, never Lean's: a toy's measurement (SmolLM2-
135M, the warm start's format learnt from demonstrations, on a CPU), not a prover's figures.

Disk: each SFT and RL checkpoint of SmolLM2 with its optimizer state is about 1.8 GB and a run refuses to write one
without room, so two iterations need about 8 GB free in ``--data-dir``; the checkpoints are removed at the end unless
``--keep-checkpoints``.

Wall times include each run's queueing, start-up (Ray job, model, vLLM engine) and ingestion; the machine's load
average is printed before and after, since other work on it slows every stage.

Rerun: .venv/bin/python benchmarks/cpu_demo_pipeline.py [--iterations 2] [--rl-steps 4] [--harvest-samples 4]
       [--benchmark-samples 2] [--held-out 0.5] [--data-dir var/cpu-demo-pipeline] [--timeout-min 75]
       [--keep-checkpoints]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "platform")]

from leanrl.client import PlatformClient  # noqa: E402 - after the repository is on sys.path, above
from deploy.services import free_port  # noqa: E402 - after the repository is on sys.path, above
from deploy.stack import Stack, ignore_signals_while_stopping, stop_on_signals, parse_args  # noqa: E402 - after the repository is on sys.path, above
from deploy.warm_start import STATUS_FILE, warm_start_build_dir, warm_start_checkpoint_path  # noqa: E402 - after the repository is on sys.path, above
from trainer.sft.warm_start_status import read_warm_start_status  # noqa: E402 - after the repository is on sys.path, above
from promptsets.demo import DEMO_PROMPTSET_NAME  # noqa: E402 - pure data, no Django

DEMO_USER = "demo"
# Made afresh on every run; the warm start and the compile caches are what a rerun reuses.
THROWAWAY = ("postgres", "redis", "logs", "artifacts")


def parse_options(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2, help="The pipeline's max_iterations.")
    parser.add_argument("--harvest-samples", type=int, default=4, help="Samples per training problem when harvesting.")
    parser.add_argument("--benchmark-samples", type=int, default=2, help="Samples per benchmark problem: the k of pass@k.")
    parser.add_argument("--rl-steps", type=int, default=4, help="Each RL run's total_steps.")
    # Half: with a quarter held out (6 easy true statements) the warm start already solved all of them at pass@4.
    parser.add_argument("--held-out", type=float, default=0.5, help="Share of the demo promptset held out as benchmark.")
    parser.add_argument("--seed", type=int, default=0, help="The split's seed.")
    parser.add_argument("--data-dir", type=Path, default=ROOT / "var" / "cpu-demo-pipeline")
    parser.add_argument("--timeout-min", type=float, default=75,
                        help="Give up (and print what finished) after this many minutes of the pipeline.")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="Keep the runs' artifacts (checkpoints, about 1.8 GB each) in DATA_DIR/artifacts.")
    return parser.parse_args(argv)


def make_stack(data_dir: Path) -> Stack:
    for name in THROWAWAY:
        shutil.rmtree(data_dir / name, ignore_errors=True)
    ports = {flag: free_port() for flag in ("--web-port", "--postgres-port", "--redis-port", "--ray-port",
                                            "--ray-dashboard-port", "--lean-port")}
    options = parse_args(["--data-dir", str(data_dir), "--ray-cpus", "2",
                          *[str(part) for flag, port in ports.items() for part in (flag, port)]])
    stack = Stack(options)
    # Short (Ray's socket paths must fit 107 bytes) and this process's own: another stack's head keeps its own.
    stack.ray.temp_dir = Path(f"/tmp/ray-cdp-{os.getpid()}")
    return stack


def wait_for_warm_start(stack: Stack, data_dir: Path) -> float:
    """The cpu-demo preset refuses to launch from the bare SmolLM2 until its warm start is ready; seconds waited."""
    began = time.monotonic()
    said = None
    while True:
        # Read with the stack's environment: "ready" needs vLLM compiled in the caches the stack hands to its runs.
        status = read_warm_start_status(warm_start_checkpoint_path(data_dir),
                                        warm_start_build_dir(data_dir) / STATUS_FILE, stack.env)
        if status["state"] == "ready":
            return time.monotonic() - began
        if status["state"] == "failed" or (status["state"] != "compiling" and stack.warm_start.process is not None
                                           and not stack.warm_start.is_running()):
            raise RuntimeError(f"the warm start failed: {status}; see {data_dir / 'logs' / 'warm-start.log'}")
        line = f"warm start: {status['state']} {status.get('message', '')}"
        if line != said:
            print(f"  {line}", flush=True)
            said = line
        for service in stack.started:
            stack.supervisor.check(service)
        time.sleep(5)


def api_token(stack: Stack) -> str:
    made = subprocess.run([sys.executable, "manage.py", "create_api_token", DEMO_USER, "--scope", "launch",
                           "--name", "cpu-demo pipeline benchmark"], cwd=ROOT, env=stack.env, check=True,
                          capture_output=True, text=True)
    return made.stdout.strip().splitlines()[-1]


def split_demo_promptset(api: PlatformClient, held_out: float, seed: int) -> tuple[dict, dict, list[str]]:
    """The demo promptset's version 1 split by the platform's curation: (training version, held-out version, the
    held-out problems' keys)."""
    [demo] = [p for p in api.call("promptsets_api_list_promptsets")
              if p["name"] == DEMO_PROMPTSET_NAME and p["owner"] == DEMO_USER]
    training, evaluation = api.call("promptsets_api_curate_version", path={"promptset_id": demo["id"], "number": 1},
                                    json_body={"kind": "split", "eval_fraction": held_out, "seed": seed})
    api.call("promptsets_benchmarks_api_mark_benchmark", json_body={
        "promptset_version_id": evaluation["id"], "name": f"Demo held out (split seed {seed})"})
    problems = api.call("promptsets_api_list_version_problems",
                        path={"promptset_id": demo["id"], "number": evaluation["number"]})
    return training, evaluation, [problem["problem_key"] for problem in problems]


def watch(api: PlatformClient, stack: Stack, pipeline_id: int, timeout_s: float) -> tuple[dict, bool]:
    """The pipeline's page until it ends or ``timeout_s`` passes: (its last state, whether it ended)."""
    began = time.monotonic()
    said = None
    while True:
        detail = api.call("pipelines_api_pipeline_detail", path={"pipeline_id": pipeline_id})
        current = next((stage for stage in detail["stages"] if stage["status"] == "current"), None)
        iteration = detail["iterations"][-1]["number"] if detail["iterations"] else 0
        line = (f"iteration {iteration}, {current['label']}" + (f": run {current['run']['id']} {current['run']['state']}"
                                                               if current and current["run"] else "")
                if current else detail["state"])
        if line != said:
            print(f"  [{(time.monotonic() - began) / 60:5.1f} min] {line}", flush=True)
            said = line
        if detail["state"] != "running":
            return detail, True
        if time.monotonic() - began > timeout_s:
            return detail, False
        for service in stack.started:
            stack.supervisor.check(service)
        time.sleep(5)


def _seconds(run: dict) -> float | None:
    if not run.get("started_at") or not run.get("finished_at"):
        return None
    return (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()


def stage_runs(api: PlatformClient, detail: dict) -> dict[tuple[int, str], dict]:
    """(iteration, stage) → the run's page, with the RL promptset version's label from the lineage."""
    runs = {}
    for edge in detail["lineage"]:
        if edge.get("run"):
            run = api.call("runs_api_get_run", path={"run_id": edge["run"]["id"]})
            runs[(edge["iteration"], edge["stage"])] = {**run, "data_label": (edge.get("data") or {}).get("label", "")}
    return runs


def _run_cell(run: dict | None) -> str:
    if run is None:
        return "—"
    seconds = _seconds(run)
    if run["kind"] == "eval":
        steps = run["state"]
    else:  # an SFT run's steps follow from its corpus: no plan to show beside them
        steps = f"{run['current_step']}" + (f"/{run['planned_steps']}" if run["planned_steps"] else "") + " steps"
    return f"{steps}, {seconds:.0f} s" if seconds is not None else f"{steps}, {run['state']}"


def print_table(detail: dict, runs: dict) -> None:
    header = ["it.", "harvest run", "proofs harvested", "corpus (refused)", "unsolved", "SFT", "RL", "RL promptset",
              "benchmark run", "benchmark pass@k", "gain", "plateau verdict"]
    def shown(value) -> str:
        return "—" if value is None else str(value)  # not known yet is never shown as 0

    rows = []
    for row in detail["iterations"]:
        n = row["number"]
        solved = ("not measured" if row["benchmark_solved"] is None else
                  f"{row['benchmark_solved']}/{row['benchmark_problems']} (pass@{row['benchmark_k']} "
                  f"{row['benchmark_pass_at_k']:.2f})")
        rl = runs.get((n, "rl"))
        rows.append([str(n), _run_cell(runs.get((n, "harvest"))), shown(row["proofs_harvested"]),
                     "—" if row["corpus_size"] is None else f"{row['corpus_size']} ({row['corpus_refused']})",
                     shown(row["problems_unsolved"]), _run_cell(runs.get((n, "sft"))), _run_cell(rl),
                     rl["data_label"] if rl else "—", _run_cell(runs.get((n, "benchmark"))), solved,
                     shown(row["benchmark_gain"]),
                     row["plateau_verdict"] or "—"])
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")


def main(argv=None) -> int:
    options = parse_options(argv)
    data_dir = options.data_dir.resolve()
    load_before = os.getloadavg()
    began = time.monotonic()
    print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}", flush=True)
    stack = None
    stop_on_signals()  # Ctrl-C or SIGTERM stops every service it started, even as a shell's background job
    try:
        stack = make_stack(data_dir)
        stack.start()  # inside the try: a Ctrl-C while it starts still stops what it started
        waited = wait_for_warm_start(stack, data_dir)
        print(f"stack up in {time.monotonic() - began:.0f} s (of which {waited:.0f} s waiting for the warm start)",
              flush=True)
        api = PlatformClient(f"http://127.0.0.1:{stack.options.web_port}", api_token(stack))
        training, held_out, held_out_keys = split_demo_promptset(api, options.held_out, options.seed)
        print(f"training: version {training['number']} ({training['problem_count']} problems); held-out benchmark: "
              f"version {held_out['number']} ({held_out['problem_count']} problems, statement-disjoint): "
              f"{', '.join(held_out_keys)}", flush=True)
        launched = api.call("pipelines_api_launch_pipeline", json_body={
            "name": "cpu-demo pipeline", "preset": "cpu-demo", "training_version_id": training["id"],
            "benchmark_version_id": held_out["id"], "harvest_samples": options.harvest_samples,
            "benchmark_samples": options.benchmark_samples,
            # The benchmark stage is the evaluation: none inside the RL run; one checkpoint, at its end.
            "rl_fields": {"total_steps": options.rl_steps, "eval_every": 0, "checkpoint_every": 0},
            "rl_max_win_rate": 0.5, "max_iterations": options.iterations, "min_gain": 1})
        pipeline_began = time.monotonic()
        print(f"pipeline {launched['id']} launched", flush=True)
        detail, ended = watch(api, stack, launched["id"], options.timeout_min * 60)
        pipeline_s = time.monotonic() - pipeline_began
        runs = stage_runs(api, detail)
        record = {"pipeline": detail, "runs": {f"{n}/{stage}": run for (n, stage), run in runs.items()}}
        (data_dir / "logs" / "pipeline.json").write_text(json.dumps(record, indent=1))
        print(f"\npipeline {detail['id']} {detail['state']}" + (f": {detail['failure_reason']}"
                                                               if detail["failure_reason"] else "")
              + ("" if ended else f" (still running after {options.timeout_min} min: what finished is below)"))
        verdicts = ("stand-in verdicts (the stand-in Lean server's, not Lean's)" if detail["verified_by"] == "stand-in"
                    else f"verified by {detail['verified_by'] or 'no verifier yet'}")
        print(f"{verdicts}; a toy's measurement: SmolLM2-135M, {os.cpu_count()} CPU cores shared")
        print_table(detail, runs)
        print(f"\npipeline wall time {pipeline_s / 60:.1f} min; whole benchmark {(time.monotonic() - began) / 60:.1f} "
              f"min; the API's record: {data_dir / 'logs' / 'pipeline.json'}")
        return 0 if ended and detail["state"] == "succeeded" else 1
    finally:
        ignore_signals_while_stopping()
        if stack is not None:
            stack.stop()
            shutil.rmtree(stack.ray.temp_dir, ignore_errors=True)
            if not options.keep_checkpoints:
                shutil.rmtree(data_dir / "artifacts", ignore_errors=True)  # the figures are in logs/pipeline.json
        load_after = os.getloadavg()
        print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
