"""vLLM's start-up on CPU for the cpu-demo policy, the first time and again: what its compile cache saves.

Two processes one after the other, each building the cpu-demo's vLLM engine (``build_engine``: the SmolLM2
policy staged into its content-named folder, compiled unless ``--eager``) with the same, initially empty,
compile caches (``VLLM_CACHE_ROOT`` and ``TORCHINDUCTOR_CACHE_DIR``, which holds vLLM's graphs on CPU), then closing it. The first compiles and fills the cache; the second should find it
(vLLM keys the cache by its config, the model's folder included: trainer/rollout/vllm_engine.py
``staged_policy_folder``). Each line gives the process's whole wall time (imports and the model's loading
included) and the engine's build alone, with the load average before and after.

With ``--runs``, two whole cpu-demo runs instead (``python -m trainer run``, one step, the demo promptset, the
stand-in Lean), one after the other on the same initially empty cache: for each, the seconds from launching the
process to its first step starting to generate (imports, the model, the learner and the engine before it), to
its first answer, and the engine's own start as the run's log reports it.

Rerun: .venv/bin/python benchmarks/vllm_start_up.py [--cache-root DIR] [--eager] [--logs DIR] [--runs [--init-checkpoint DIR]]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_once(eager: bool) -> dict:
    """In this process: load the policy, build the engine, close it; seconds of the build."""
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from trainer.config import RunConfig
    from trainer.learning.models import load_policy
    from trainer.rollout.engines import build_engine

    config = RunConfig.from_preset("cpu-demo", {"rollout": {"engine": "vllm", "vllm_enforce_eager": eager}})
    model, tokenizer = load_policy(config.model, seed=0)
    started = time.perf_counter()
    engine = build_engine(config, model, tokenizer)
    build_s = time.perf_counter() - started
    engine.close()
    return {"build_s": build_s}


def run_once(environment: dict, work: Path, standin_url: str, init_checkpoint: str | None) -> dict:
    """One cpu-demo step through ``python -m trainer run``: seconds from the launch to each milestone."""
    sys.path[:0] = [str(ROOT), str(ROOT / "platform")]
    from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS

    work.mkdir(parents=True, exist_ok=True)
    promptset = work / "demo.jsonl"
    promptset.write_text("".join(json.dumps({"problem_id": problem.key, "formal_statement": problem.formal_statement,
                                             "header": DEMO_HEADER}) + "\n" for problem in DEMO_PROBLEMS))
    command = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-demo", "--promptset", str(promptset),
               "--output", str(work / "run"), "--lean-url", standin_url, "--set", "schedule.total_steps=1",
               "--set", "schedule.eval_every=0", "--set", "schedule.checkpoint_every=0"]
    if init_checkpoint:
        command += ["--set", f"model.init_checkpoint={init_checkpoint}"]
    launched = time.time()
    child = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
    if child.returncode != 0:
        raise SystemExit(f"the run failed:\n{child.stderr[-3000:]}")
    events = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    first = {kind: next(event for event in events if event["type"] == kind) for kind in ("step_started", "rollout_finished")}
    ready = next(event["payload"]["message"] for event in events
                 if event["type"] == "log" and event["payload"]["message"].startswith("rollout engine "))
    return {"to_first_step_s": first["step_started"]["time"] - launched,
            "to_first_answer_s": first["rollout_finished"]["time"] - launched, "engine": ready}


def compare_runs(environment: dict, init_checkpoint: str | None) -> None:
    from trainer.verification.standin_server import StandinServerThread, StandinSettings

    with StandinServerThread(StandinSettings()) as standin, tempfile.TemporaryDirectory(prefix="start-up-") as work:
        for label in ("first run", "second run"):
            before = os.getloadavg()
            figures = run_once(environment, Path(work) / label.replace(" ", "-"), standin.url, init_checkpoint)
            after = os.getloadavg()
            print(f"{label:10s} launch → first step generating {figures['to_first_step_s']:6.1f} s, → first answer "
                  f"{figures['to_first_answer_s']:6.1f} s; its log: {figures['engine']}  "
                  f"(load {before[0]:.2f} before, {after[0]:.2f} after)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-root", default=None, help="where both starts keep vLLM's and inductor's compile caches "
                                                           "(default: a new empty folder)")
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--logs", default=None, help="a folder to keep each start's vLLM log in (where the seconds go)")
    parser.add_argument("--runs", action="store_true", help="time two whole cpu-demo runs instead of two engines")
    parser.add_argument("--init-checkpoint", default=None, help="with --runs: the model folder to start from "
                                                                "(the warm start's); default SmolLM2 itself")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(build_once(args.eager)))
        return
    cache_root = args.cache_root or tempfile.mkdtemp(prefix="vllm-cache-")
    # On CPU vLLM's compiled graphs live in torch inductor's cache (vllm/platforms/cpu.py), on GPUs in VLLM_CACHE_ROOT.
    environment = {**os.environ, "VLLM_CACHE_ROOT": os.path.join(cache_root, "vllm"),
                   "TORCHINDUCTOR_CACHE_DIR": os.path.join(cache_root, "inductor")}
    print(f"{os.cpu_count()} CPUs; compile caches under {cache_root}; vLLM {'eager' if args.eager else 'compiled'}")
    if args.runs:
        compare_runs(environment, args.init_checkpoint)
        print("rerun: .venv/bin/python benchmarks/vllm_start_up.py " + " ".join(sys.argv[1:]))
        return
    for label in ("first start", "second start"):
        before = os.getloadavg()
        started = time.perf_counter()
        child = subprocess.run([sys.executable, __file__, "--child", *(["--eager"] if args.eager else [])],
                               env=environment, capture_output=True, text=True, check=False)
        wall_s = time.perf_counter() - started
        if child.returncode != 0:
            raise SystemExit(f"{label} failed:\n{child.stderr[-3000:]}")
        if args.logs:
            Path(args.logs).mkdir(parents=True, exist_ok=True)
            (Path(args.logs) / f"{label.replace(' ', '-')}.log").write_text(child.stderr)
        figures = json.loads(child.stdout.strip().splitlines()[-1])
        after = os.getloadavg()
        print(f"{label:13s} process {wall_s:6.1f} s, engine build {figures['build_s']:6.1f} s  "
              f"(load {before[0]:.2f} before, {after[0]:.2f} after)", flush=True)
    print("rerun: .venv/bin/python benchmarks/vllm_start_up.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
