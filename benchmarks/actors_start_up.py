"""The start-up of a run placed as Ray actors against the torchrun start it replaced, as ratios in one run.

The same cpu-smoke run of two learner ranks (``cluster.num_gpus=2``, CPU processes standing in for the GPUs, one
step), started three ways one after the other on this machine against one stand-in Lean server:

- **torchrun** (the baseline, how the platform started it until issue 46):
  ``python -m torch.distributed.run --standalone --nproc-per-node 2 -m trainer run …``;
- **the driver on a running cluster** (how a Ray job's entrypoint starts it now): ``python -m trainer run …`` with
  RAY_ADDRESS set to a Ray head started beforehand (outside the timing), the driver placing its placement group and
  two learner-rank actors;
- **the driver alone** (how a person starts it outside a Ray job): the same command, the driver starting a local
  Ray of its own first.

For each, the seconds from the launch to the first step starting (``step_started``, published by learner rank 0
once the ranks have joined, loaded the policy and built their engines) and to the run's end; then each actors
start as a ratio of torchrun's. Load averages before and after each run are printed: on a shared machine they
move the figures more than anything measured.

Rerun: .venv/bin/python benchmarks/actors_start_up.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN = ("cluster.num_gpus=2", "cluster.cpus_per_worker=1", "schedule.total_steps=1", "schedule.checkpoint_every=0",
       "schedule.eval_every=0")


def start_once(launcher: list[str], work: Path, lean_url: str, environment: dict[str, str]) -> dict:
    """One run; seconds from its launch to its first step and to its end."""
    sys.path[:0] = [str(ROOT)]
    from trainer.sft.smoke_model import write_smoke_promptset

    work.mkdir(parents=True, exist_ok=True)
    promptset = work / "smoke.jsonl"
    write_smoke_promptset(promptset)
    command = [*launcher, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
               "--output", str(work / "run"), "--lean-url", lean_url]
    for setting in RUN:
        command += ["--set", setting]
    launched = time.time()
    child = subprocess.run(command, cwd=ROOT, env=environment, capture_output=True, text=True, check=False)
    ended = time.time()
    if child.returncode != 0:
        raise SystemExit(f"the run ({' '.join(launcher)}) failed:\n{child.stderr[-3000:]}")
    events = [json.loads(line) for line in child.stdout.splitlines() if line.startswith("{")]
    first_step = next(event["time"] for event in events if event["type"] == "step_started")
    return {"to_first_step_s": first_step - launched, "to_end_s": ended - launched}


def start_ray_head(temp_dir: str) -> tuple[str, subprocess.Popen]:
    """A Ray head of this benchmark's own, with the two logical GPUs the run asks for; its address."""
    script = ("import sys\nfrom ray.cluster_utils import Cluster\n"
              "cluster = Cluster(initialize_head=True, head_node_args={'num_cpus': 3, 'num_gpus': 2, "
              f"'include_dashboard': False, 'temp_dir': {temp_dir!r}}})\n"
              "print(cluster.address, flush=True)\n"
              "sys.stdin.read()\ncluster.shutdown()\n")
    head = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    return head.stdout.readline().strip(), head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="Runs of each start (the median is reported).")
    options = parser.parse_args()
    sys.path[:0] = [str(ROOT)]
    from trainer.verification.standin_server import StandinServerThread

    base = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    base.update({"TRAINER_CPU_STANDS_IN_FOR_GPUS": "1", "HF_HUB_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"})
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB; Python {platform.python_version()}")
    temp_dir = tempfile.mkdtemp(prefix="rb-", dir="/tmp")
    address, head = start_ray_head(temp_dir)
    starts = {
        "torchrun": ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"], base),
        "driver on a running cluster": ([sys.executable], {**base, "RAY_ADDRESS": address}),
        "driver alone (its own local Ray)": ([sys.executable], base),
    }
    figures: dict[str, list[dict]] = {label: [] for label in starts}
    try:
        with StandinServerThread() as standin, tempfile.TemporaryDirectory(prefix="actors-start-") as work:
            for repeat in range(options.repeats):
                for label, (launcher, environment) in starts.items():
                    before = os.getloadavg()[0]
                    figure = start_once(launcher, Path(work) / f"{repeat}-{len(figures[label])}-{label[:6]}",
                                        standin.url, environment)
                    figures[label].append(figure)
                    print(f"{label}: launch → first step {figure['to_first_step_s']:.1f} s, → end "
                          f"{figure['to_end_s']:.1f} s (load average {before:.2f} → {os.getloadavg()[0]:.2f})",
                          flush=True)
    finally:
        head.stdin.close()
        head.wait(timeout=60)
        subprocess.run(["rm", "-rf", temp_dir], check=False)
    baseline = statistics.median(figure["to_first_step_s"] for figure in figures["torchrun"])
    for label in list(starts)[1:]:
        median = statistics.median(figure["to_first_step_s"] for figure in figures[label])
        print(f"{label} / torchrun, launch → first step: {median:.1f} s / {baseline:.1f} s = {median / baseline:.2f}×")


if __name__ == "__main__":
    main()
