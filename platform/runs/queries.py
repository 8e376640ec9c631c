"""What the runs list, the run page and the comparison read: summaries, series, logs, config diffs."""

from __future__ import annotations

import os

from django.conf import settings

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from runs.models import Checkpoint, Run, RunEvent, RunState, StepMetrics
from trainer.events import EventType

SPARKLINE_STEPS = 30
LOG_LINES_SHOWN = 200

# The trainer's metric names (trainer/driver.py step_metrics) that the list and the charts single out.
REWARD_KEY = "reward/mean"
ACCURACY_KEY = "lean/accuracy"

SORTS = {
    "name": "name", "-name": "-name",
    "state": "state", "-state": "-state",
    "step": "current_step", "-step": "-current_step",
    "created": "created_at", "-created": "-created_at",
    "preset": "preset", "-preset": "-preset",
}
DEFAULT_SORT = "-created"


def filter_runs(queryset: QuerySet[Run], *, state: str = "", search: str = "", sort: str = "") -> QuerySet[Run]:
    if state == "active":
        queryset = queryset.active()
    elif state in RunState.values:
        queryset = queryset.filter(state=state)
    if search.strip():
        queryset = queryset.filter(name__icontains=search.strip())
    return queryset.order_by(SORTS.get(sort, SORTS[DEFAULT_SORT]), "-pk")


def elapsed_seconds(run: Run, now=None) -> float | None:
    """Training time so far (or in all, once finished); None before the trainer started."""
    if not run.started_at:
        return None
    end = run.finished_at or now or timezone.now()
    return max(0.0, (end - run.started_at).total_seconds())


def recent_metrics(run_ids: list[int], steps: int = SPARKLINE_STEPS) -> dict[int, list[StepMetrics]]:
    """The last ``steps`` metrics rows of each run, oldest first, in one query."""
    rows = (
        StepMetrics.objects.filter(run_id__in=run_ids)
        .annotate(recency=Window(RowNumber(), partition_by=[F("run_id")], order_by=F("step").desc()))
        .filter(recency__lte=steps)
        .order_by("run_id", "step")
    )
    by_run: dict[int, list[StepMetrics]] = {run_id: [] for run_id in run_ids}
    for row in rows:
        by_run[row.run_id].append(row)
    return by_run


def run_summaries(runs: list[Run]) -> list[dict]:
    """One row of the runs list per run, JSON-ready (the page renders it, the live poll refreshes it)."""
    metrics = recent_metrics([run.pk for run in runs])
    now = timezone.now()
    summaries = []
    for run in runs:
        series = metrics.get(run.pk, [])
        rewards = [_number(m.values.get(REWARD_KEY)) for m in series]
        accuracies = [_number(m.values.get(ACCURACY_KEY)) for m in series]
        summaries.append({
            "id": run.pk,
            "url": run.get_absolute_url(),
            "name": run.name,
            "state": run.state,
            "state_label": run.get_state_display(),
            "preset": run.preset,
            "model": (run.config.get("model") or {}).get("name_or_path", ""),
            "promptset_version": str(run.promptset_version),
            "step": run.current_step,
            "total_steps": run.planned_steps,
            "reward": rewards[-1] if rewards else None,
            "accuracy": accuracies[-1] if accuracies else None,
            "reward_series": rewards,
            "accuracy_series": accuracies,
            "elapsed_s": elapsed_seconds(run, now),
            "created_at": run.created_at.isoformat(),
        })
    return summaries


def metric_series(run: Run) -> dict:
    """Every step's metrics and every evaluation, for the run page's charts."""
    return {
        "metrics": [{"step": m.step, "values": m.values} for m in run.step_metrics.all()],
        "evaluations": [{"step": e.step, "values": e.values} for e in run.evaluations.all()],
    }


def log_lines(run: Run, limit: int = LOG_LINES_SHOWN) -> list[dict]:
    """The trainer's latest log lines and errors, oldest first, in the shape the WebSocket delivers them."""
    events = list(
        RunEvent.objects.filter(run=run, type__in=(EventType.LOG, EventType.ERROR)).order_by("-pk")[:limit]
    )
    return [{"id": e.pk, "number": e.run_seq, "type": e.type, "time": e.published_at.timestamp(), "payload": e.payload}
            for e in reversed(events)]


TRACKER_NAMES = {"wandb": "Weights & Biases", "mlflow": "MLflow", "tensorboard": "TensorBoard"}


def tracking_links(run: Run) -> list[dict]:
    """Where each of the run's trackers logs it (the latest word of each), from the trainer's tracking events."""
    latest = {}
    for event in RunEvent.objects.filter(run=run, type=EventType.TRACKING).order_by("pk"):
        latest[event.payload.get("backend", "")] = event.payload
    return [{"name": TRACKER_NAMES.get(backend, backend), "location": payload.get("location", ""),
             "is_url": str(payload.get("location", "")).startswith(("http://", "https://")),
             "error": payload.get("error", "")}
            for backend, payload in sorted(latest.items())]


def ray_dashboard_url(run: Run) -> str | None:
    """The run's job in Ray's dashboard, where the deployment says browsers can reach it."""
    if not run.ray_job_id or not settings.RAY_DASHBOARD_URL:
        return None
    return f"{settings.RAY_DASHBOARD_URL.rstrip('/')}/#/jobs/{run.ray_job_id}"


def disk_used_bytes(run: Run) -> int | None:
    """Bytes under the run's artifacts folder (checkpoints, exports, tracker files); None where it is not here."""
    folder = run.artifacts_dir
    if not folder.is_dir():
        return None
    total = 0
    for root, _folders, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed while we walked (retention deleting a checkpoint)
                continue
    return total


def last_event_number(run_id: int) -> int:
    """The run's highest ``run_seq`` stored (0 before any): the page asks for what comes after it."""
    return RunEvent.objects.filter(run_id=run_id).order_by("-run_seq").values_list("run_seq", flat=True).first() or 0


EVENT_PAGE_LIMIT = 500  # events per page of a replay: a browser far behind asks again, page by page


def events_after(run_id: int, after: int, limit: int = EVENT_PAGE_LIMIT) -> list[dict]:
    """The run's events numbered after ``after``, oldest first, at most ``limit`` (capped at
    EVENT_PAGE_LIMIT), as a watching browser receives them."""
    from proofs.models import ProofAttempt
    from runs.ingest import browser_message

    limit = max(1, min(limit, EVENT_PAGE_LIMIT))
    events = list(RunEvent.objects.filter(run_id=run_id, run_seq__gt=after).order_by("run_seq")[:limit])
    attempt_ids = dict(ProofAttempt.objects.filter(event__in=[e.pk for e in events]).values_list("event_id", "pk"))
    for event in events:
        event.attempt_id = attempt_ids.get(event.pk)
    return [browser_message(event) for event in events]


def dead_letter_count(run: Run) -> int:
    return run.dead_letters.count()


def checkpoints(run: Run) -> list[Checkpoint]:
    return list(run.checkpoints.all())


def flatten(config: dict, prefix: str = "") -> dict[str, object]:
    """``{"rollout": {"temperature": 1.0}}`` → ``{"rollout.temperature": 1.0}``."""
    flat: dict[str, object] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def config_diff(config: dict, other: dict) -> list[dict]:
    """The settings in which two resolved configurations differ, by dotted path, in path order."""
    mine, theirs = flatten(config), flatten(other)
    missing = object()
    rows = []
    for path in sorted(mine.keys() | theirs.keys()):
        a, b = mine.get(path, missing), theirs.get(path, missing)
        if a != b:
            rows.append({"path": path, "this": None if a is missing else a, "other": None if b is missing else b,
                         "only_in": "this" if b is missing else "other" if a is missing else ""})
    return rows


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
