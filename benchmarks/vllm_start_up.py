"""vLLM's start-up on CPU for the cpu-demo policy, the first time and again: what its compile cache saves.

Two processes one after the other, each building the cpu-demo's vLLM engine (``build_engine``: the SmolLM2
policy staged into its content-named folder, compiled unless ``--eager``) with the same, initially empty,
``VLLM_CACHE_ROOT``, then closing it. The first compiles and fills the cache; the second should find it
(vLLM keys the cache by its config, the model's folder included: trainer/rollout/vllm_engine.py
``staged_policy_folder``). Each line gives the process's whole wall time (imports and the model's loading
included) and the engine's build alone, with the load average before and after.

Rerun: .venv/bin/python benchmarks/vllm_start_up.py [--cache-root DIR] [--eager] [--logs DIR]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-root", default=None, help="VLLM_CACHE_ROOT for both starts (default: a new empty folder)")
    parser.add_argument("--eager", action="store_true")
    parser.add_argument("--logs", default=None, help="a folder to keep each start's vLLM log in (where the seconds go)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(build_once(args.eager)))
        return
    cache_root = args.cache_root or tempfile.mkdtemp(prefix="vllm-cache-")
    environment = {**os.environ, "VLLM_CACHE_ROOT": cache_root}
    print(f"{os.cpu_count()} CPUs; VLLM_CACHE_ROOT={cache_root}; vLLM {'eager' if args.eager else 'compiled'}")
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
