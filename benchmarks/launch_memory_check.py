"""Seconds the launch check of the h100x8 preset takes in a fresh web process: the learner's memory plan
made there (the baseline: what every web process did before plans were stored) against the plan read
back from the database (runs.models.LearnerPlan, as after ``manage.py plan_presets``), in the same run.

Each case is a new Python process, as a web worker after a deploy or a restart is, timing
``runs.actions.resolve_config("h100x8", {})`` once (Django already set up, the database connected, torch and
transformers imported: their import, a few seconds, is paid by a process's first GPU launch check either way
and is printed apart).

Rerun:  .venv/bin/python benchmarks/launch_memory_check.py [--preset h100x8]
Uses DATABASE_URL if set; otherwise starts a throwaway embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_DIR / "platform"), str(REPO_DIR)]

from scratch_database import migrated_database  # noqa: E402 - found on the path set just above

ONE_LAUNCH_CHECK = """
import json, os, sys, time
sys.path[:0] = [{platform!r}, {repo!r}]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.db import connection
from runs import actions
from runs.models import LearnerPlan
connection.ensure_connection()
stored = LearnerPlan.objects.count()
started = time.perf_counter()
import torch, transformers  # what any first GPU launch check of a process imports, stored plan or not
imported = time.perf_counter()
actions.resolve_config({preset!r}, {{}})
checked = time.perf_counter()
actions.resolve_config({preset!r}, {{}})
print(json.dumps({{"import_seconds": imported - started, "seconds": checked - imported,
                  "again_seconds": time.perf_counter() - checked, "plans_stored_before": stored}}))
"""


def one_launch_check(preset: str) -> dict:
    code = ONE_LAUNCH_CHECK.format(platform=str(REPO_DIR / "platform"), repo=str(REPO_DIR), preset=preset)
    done = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=os.environ.copy())
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="h100x8")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="launch-check-") as scratch, migrated_database(Path(scratch)):
        load_before = os.getloadavg()
        planned = one_launch_check(arguments.preset)
        stored = one_launch_check(arguments.preset)
        load_after = os.getloadavg()
    assert planned["plans_stored_before"] == 0 and stored["plans_stored_before"] == 1, (planned, stored)
    print(f"load average (1, 5, 15 min) {' '.join(f'{x:.2f}' for x in load_before)} before, "
          f"{' '.join(f'{x:.2f}' for x in load_after)} after")
    print("| launch check of a fresh process | first check, s | vs baseline | the same check again, s "
          "| importing torch and transformers first, s |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for label, case in (("baseline: plans the learner itself", planned), ("reads the stored plan", stored)):
        print(f"| {label} | {case['seconds']:.2f} | x{planned['seconds'] / case['seconds']:.1f} faster "
              f"| {case['again_seconds']:.3f} | {case['import_seconds']:.2f} |")
    print("Most of the stored plan's first check is importing (transformers' model modules, torch._dynamo), once "
          "per process; the check itself is the 'again' column.")
    print(f"rerun: {sys.executable} benchmarks/launch_memory_check.py --preset {arguments.preset}")


if __name__ == "__main__":
    main()
