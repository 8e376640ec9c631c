"""Rows per second and peak memory of a 100,000-row JSON Lines promptset upload, end to end.

Each stage runs in its own child process, so each peak RSS is that stage's alone:

* baseline: the naive reader, the whole file parsed into a list with ``json.loads`` (no validation,
  nothing stored); the memory a non-streaming upload would need just to hold the rows
* validate: ``intake.check_file`` streaming the file (every row read, checked, fingerprinted)
* import: ``actions.import_promptset`` into PostgreSQL (what the command runs, and the worker runs for
  the form and the API after its child process has checked the file)

Ratios are against the baseline measured in the same run. "Growth" is the peak RSS minus the RSS
after imports (Python, Django, pyarrow), i.e. what the stage itself held.

Rerun:  .venv/bin/python benchmarks/promptset_upload.py [--rows 100000 --informal-bytes 600]
Uses DATABASE_URL if set; otherwise starts a throwaway embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_DIR / "platform"), str(REPO_DIR)]

from scratch_database import migrated_database  # noqa: E402 - found on the path set just above

HEADER = "import Mathlib\nimport Aesop\nset_option maxHeartbeats 400000\nopen BigOperators Real Nat Topology Rat\n\n"


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def write_rows(path: Path, rows: int, informal_bytes: int) -> None:
    filler = ("Let a, b and c be natural numbers with a + b = c. " * (1 + informal_bytes // 50))[:informal_bytes]
    with open(path, "w") as file:
        for index in range(rows):
            file.write(json.dumps({
                "statement_id": f"bench-{index}",
                "formal_statement": f"{HEADER}theorem bench_{index} (a b : ℕ) (h₀ : a = {index}) (h₁ : b = a + 1) :\n"
                                    f"    a + b = {2 * index + 1} := by\n  sorry",
                "natural_language": f"Problem {index}. {filler}",
                "source": "benchmark",
                "rl_data": {"win_rate": (index % 17) / 16},
            }, ensure_ascii=False) + "\n")


def run_stage(stage: str, path: Path) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from promptsets.versions import import_promptset
    from promptsets.intake import FileCheck, check_file

    before = rss_mb()
    started = time.perf_counter()
    if stage == "baseline":
        with open(path, "rb") as file:
            rows = [json.loads(line) for line in file.read().splitlines()]
        count = len(rows)
    elif stage == "validate":
        with open(path, "rb") as file:
            report = check_file(file, filename=path.name)
        count = report.rows_accepted
        assert report.is_clean, report.summary()
    else:
        from django.contrib.auth import get_user_model

        owner, _ = get_user_model().objects.get_or_create(username="benchmark")
        with open(path, "rb") as file:
            result = import_promptset(owner, f"benchmark {time.time()}", FileCheck(file, filename=path.name))
        count = result.version.problem_count
    seconds = time.perf_counter() - started
    return {"stage": stage, "rows": count, "seconds": seconds, "rows_per_second": count / seconds,
            "peak_rss_mb": peak_rss_mb(), "growth_mb": peak_rss_mb() - before}


def child(stage: str, path: Path) -> dict:
    completed = subprocess.run([sys.executable, __file__, "--stage", stage, "--file", str(path)],
                               capture_output=True, text=True, env=os.environ.copy())
    if completed.returncode:
        raise SystemExit(f"stage {stage} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--informal-bytes", type=int, default=600, help="Length of each row's informal text.")
    parser.add_argument("--stage", choices=["baseline", "validate", "import"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(run_stage(args.stage, args.file)))
        return

    with tempfile.TemporaryDirectory(prefix="promptset-bench-") as scratch:
        scratch = Path(scratch)
        with migrated_database(scratch):
            path = scratch / "rows.jsonl"
            write_rows(path, args.rows, args.informal_bytes)
            size_mb = path.stat().st_size / 2**20
            print(f"file: {args.rows:,} rows, {size_mb:.1f} MB of JSON Lines")
            results = {stage: child(stage, path) for stage in ("baseline", "validate", "import")}
    baseline = results["baseline"]
    for stage, result in results.items():
        print(f"{stage:9s} {result['rows']:>8,} rows in {result['seconds']:6.1f} s = {result['rows_per_second']:>8,.0f} rows/s; "
              f"peak RSS {result['peak_rss_mb']:6.0f} MB (growth {result['growth_mb']:6.0f} MB); "
              f"speed x{result['rows_per_second'] / baseline['rows_per_second']:.2f}, "
              f"growth x{result['growth_mb'] / max(baseline['growth_mb'], 1):.2f} of baseline")
    print(f"rerun: {sys.executable} benchmarks/promptset_upload.py --rows {args.rows} --informal-bytes {args.informal_bytes}")


if __name__ == "__main__":
    main()
