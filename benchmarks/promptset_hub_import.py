"""Rows per second and peak memory of importing a 100,000-row promptset from a local Hub-layout dataset.

The dataset is made here: miniF2F's statements (../shared/data) under distinct theorem names, in the
Kimina-Prover-Promptset layout (statement_id, formal_statement with its preamble, natural_language,
source, rl_data.win_rate), written as ``data/train-00000-of-00001.parquet`` in a temporary folder.
Four ways of storing it run in the same run, each in a process of its own, through the real code:

* baseline: the upload path as it was: the Parquet file through the upload check
  (``IsolatedFileCheck``, the child process with the memory ceiling) in one process
  (PROMPTSET_CHECK_WORKERS=1), stored by ORM ``bulk_create`` of Problem and VersionProblem in
  batches of 2,000, in one transaction
* upload, one checker: the upload path as it is now (the check, then ``import_promptset``, which
  stores by COPY), its rows checked by one process
* upload: the same with the rows checked by one process per CPU (``isolated_check.check_workers``)
* hub: the folder as a Hub dataset: ``hub_import.stage_dataset`` (its child process) into JSON Lines,
  then the same check and ``import_promptset``

Each prints wall seconds per step (stage, check, store), rows/s end to end, CPU seconds (user and
system, of the importing process and its children; PostgreSQL's own are not counted), and peak RSS,
polled every 20 ms: of the importing process, of its largest child (stage_dataset's reader or the
check) and of all of them at once. Ratios are against the baseline of the same run. The
machine is shared, so the load average is printed before and after: rerun when it is low.

Rerun:  .venv/bin/python benchmarks/promptset_hub_import.py [--rows 100000] [--json]
Uses DATABASE_URL if set; otherwise starts a throwaway embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_DIR / "platform"), str(REPO_DIR)]

from scratch_database import migrated_database  # noqa: E402 - found on the path set just above

MINIF2F = REPO_DIR.parent / "shared" / "data" / "minif2f_valid_test.deepseek.jsonl"
PARQUET_ROW_GROUP_ROWS = 2000
ORM_BATCH_ROWS = 2000  # what import_promptset's bulk_create used
STAGES = ("baseline", "upload, one checker", "upload", "hub")
ONE_CHECKER_STAGES = ("baseline", "upload, one checker")
RSS_POLL_SECONDS = 0.02


def write_hub_dataset(folder: Path, rows: int) -> int:
    """``rows`` distinct miniF2F statements as a Hub dataset folder; returns the Parquet file's size."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from promptsets.validation import informal_from_doc_comment

    if not MINIF2F.exists():
        raise SystemExit(f"{MINIF2F} is missing: the benchmark builds its rows from miniF2F's statements")
    statements = [json.loads(line) for line in MINIF2F.read_text().splitlines()]
    path = folder / "data" / "train-00000-of-00001.parquet"
    path.parent.mkdir(parents=True)
    writer = None
    for first in range(0, rows, PARQUET_ROW_GROUP_ROWS):
        batch = []
        for index in range(first, min(rows, first + PARQUET_ROW_GROUP_ROWS)):
            source = statements[index % len(statements)]
            name = f"{source['name']}_v{index}"
            formal = re.sub(rf"\btheorem {re.escape(source['name'])}\b", f"theorem {name}", source["formal_statement"], count=1)
            batch.append({
                "statement_id": name, "formal_statement": source["header"] + formal,
                "natural_language": informal_from_doc_comment(source["informal_prefix"]),
                "source": "minif2f", "rl_data": {"win_rate": (index % 17) / 16},
            })
        table = pa.Table.from_pylist(batch)
        writer = writer or pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    writer.close()
    return path.stat().st_size


def store_with_the_orm(owner, name: str, check) -> int:
    """The baseline: how import_promptset stored a checked file before COPY (model instances, bulk_create)."""
    from django.db import reset_queries, transaction

    from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem

    stored = 0
    with transaction.atomic():
        promptset = Promptset.objects.create(owner=owner, name=name)
        version = PromptsetVersion.objects.create(promptset=promptset, number=1)
        pending: list[Problem] = []

        def flush() -> None:
            nonlocal stored
            created = Problem.objects.bulk_create(pending)
            VersionProblem.objects.bulk_create(
                VersionProblem(version=version, problem=problem, position=stored + offset)
                for offset, problem in enumerate(created)
            )
            stored += len(created)
            pending.clear()
            reset_queries()

        for candidate in check.candidates():
            pending.append(Problem(
                promptset=promptset, problem_key=candidate.problem_key, name=candidate.name,
                formal_statement=candidate.formal_statement, informal_statement=candidate.informal_statement,
                header=candidate.header, source=candidate.source, source_win_rate=candidate.source_win_rate,
                statement_hash=candidate.statement_hash,
            ))
            if len(pending) >= ORM_BATCH_ROWS:
                flush()
        if pending:
            flush()
        version.problem_count = stored
        version.save(update_fields=["problem_count"])
    return stored


def run_stage(stage: str, folder: Path) -> dict:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from django.contrib.auth import get_user_model

    from promptsets.versions import import_promptset
    from promptsets.hub_import import HubSource, stage_dataset
    from promptsets.intake import RECIPE_HEADER
    from promptsets.isolated_check import IsolatedFileCheck, check_workers

    owner, _ = get_user_model().objects.get_or_create(username="benchmark")
    name = f"{stage} {time.time()}"
    seconds = {"stage": 0.0}
    started = time.perf_counter()
    if stage == "hub":
        path = folder / "staged.jsonl"
        stage_dataset(HubSource(path=str(folder / "hub")), path)
        seconds["stage"] = time.perf_counter() - started
    else:
        path = folder / "hub" / "data" / "train-00000-of-00001.parquet"
    workers = check_workers(path.stat().st_size)
    check = IsolatedFileCheck(path, filename=path.name, default_header=RECIPE_HEADER)
    check.run()
    seconds["check"] = time.perf_counter() - started - seconds["stage"]
    if stage == "baseline":
        stored = store_with_the_orm(owner, name, check)
    else:
        stored = import_promptset(owner, name, check).version.problem_count
    seconds["total"] = time.perf_counter() - started
    seconds["store"] = seconds["total"] - seconds["stage"] - seconds["check"]
    check.close()
    assert check.report.is_clean and stored == check.report.rows_read, check.report.summary()
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"stage": stage, "rows": stored, "check_processes": workers, "seconds": seconds, "rows_per_second": stored / seconds["total"],
            "cpu_seconds": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime}


def child(stage: str, folder: Path) -> dict:
    """Run ``stage`` in a process of its own; its RSS and its children's are polled while it runs.

    Polled, not getrusage's ru_maxrss: Linux keeps ru_maxrss across exec, so a child started by a
    large process would report its parent's size.
    """
    import psutil

    environment = {**os.environ, **({"PROMPTSET_CHECK_WORKERS": "1"} if stage in ONE_CHECKER_STAGES else {})}
    process = subprocess.Popen([sys.executable, __file__, "--stage", stage, "--folder", str(folder)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    peaks = {"importer": 0, "child": 0, "sum": 0}
    stop = threading.Event()

    def poll() -> None:
        watched = psutil.Process(process.pid)
        while not stop.wait(RSS_POLL_SECONDS):
            try:
                importer = watched.memory_info().rss
                children = [child.memory_info().rss for child in watched.children(recursive=True)]
            except psutil.Error:  # a process ended between listing and reading
                continue
            peaks["importer"] = max(peaks["importer"], importer)
            peaks["child"] = max(peaks["child"], *children, 0)
            peaks["sum"] = max(peaks["sum"], importer + sum(children))

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    stdout, stderr = process.communicate()
    stop.set()
    poller.join()
    if process.returncode:
        raise SystemExit(f"stage {stage} failed:\n{stderr[-3000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update({f"peak_rss_{name}_mb": value / 2**20 for name, value in peaks.items()})
    return result


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--json", action="store_true", help="Print the results as one JSON object.")
    parser.add_argument("--stage", choices=STAGES, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stage:
        print(json.dumps(run_stage(args.stage, args.folder)))
        return

    with tempfile.TemporaryDirectory(prefix="promptset-hub-bench-") as scratch:
        scratch = Path(scratch)
        with migrated_database(scratch):
            parquet_bytes = write_hub_dataset(scratch / "hub", args.rows)
            load_before = load_average()
            results = {stage: child(stage, scratch) for stage in STAGES}
            load_after = load_average()

    baseline = results["baseline"]
    for result in results.values():
        result["speed_vs_baseline"] = result["rows_per_second"] / baseline["rows_per_second"]
    command = f"{sys.executable} benchmarks/promptset_hub_import.py --rows {args.rows}"
    if args.json:
        print(json.dumps({"rows": args.rows, "parquet_mb": parquet_bytes / 2**20, "load_average_before": load_before,
                          "load_average_after": load_after, "results": results, "rerun": command}, indent=1))
        return
    print(f"{args.rows:,} miniF2F-based rows, {parquet_bytes / 2**20:.1f} MB of Parquet; "
          f"load average (1, 5, 15 min) {load_before} before, {load_after} after")
    print("| path | checking processes | stage s | check s | store s | rows/s | vs baseline | CPU s | "
          "peak RSS MB: importer, largest child, all at once |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for stage, result in results.items():
        s = result["seconds"]
        print(f"| {stage} | {result['check_processes']} | {s['stage']:.1f} | {s['check']:.1f} | {s['store']:.1f} | "
              f"{result['rows_per_second']:,.0f} | "
              f"x{result['speed_vs_baseline']:.2f} | {result['cpu_seconds']:.1f} | {result['peak_rss_importer_mb']:.0f}, "
              f"{result['peak_rss_child_mb']:.0f}, {result['peak_rss_sum_mb']:.0f} |")
    print(f"rerun: {command}")


if __name__ == "__main__":
    main()
