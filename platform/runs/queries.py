"""What the runs list, the run page and the comparison read: summaries, series, logs, config diffs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from runs import cluster, ray_jobs, rollouts
from runs.checkpoint_files import folder_size
from runs.evaluation_results import headline_pass_at_k
from runs.ingest import browser_message
from runs.models import FINAL_STATES, Checkpoint, Evaluation, Run, RunEvent, RunKind, RunState, RunStateChange, StepMetrics
from trainer.observability.events import EventType

SPARKLINE_STEPS = 30
LOG_LINES_SHOWN = 200

# The trainer's metric names (trainer/loop/driver.py step_metrics) that the list and the charts single out.
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


@dataclass
class RunClock:
    """How long a run has trained, across its attempts, read from the trainer's own events.

    Event times, not ingestion times: the ingester may store a short run's start and end in one
    batch, and a resumed run's new start must not erase the time its first attempt trained.
    """

    trained_s: float = 0.0  # the attempts that have ended
    running_since: datetime | None = None  # the attempt training now
    has_started: bool = False
    total_steps: int | None = None  # as the trainer announced it when it last started

    def elapsed_s(self, now: datetime | None = None) -> float | None:
        if not self.has_started:
            return None
        if self.running_since is None:
            return self.trained_s
        return self.trained_s + max(0.0, ((now or timezone.now()) - self.running_since).total_seconds())


def run_clocks(runs: list[Run]) -> dict[int, RunClock]:
    """Each run's clock, in two queries whatever the number of runs."""
    marks: dict[int, list[tuple[datetime, int, str, dict]]] = {run.pk: [] for run in runs}
    starts_and_ends = (RunEvent.objects.filter(run_id__in=marks, type__in=(EventType.RUN_STARTED, EventType.RUN_FINISHED))
                       .values_list("run_id", "published_at", "type", "payload"))
    for run_id, at, kind, payload in starts_and_ends:
        marks[run_id].append((at, 1 if kind == EventType.RUN_FINISHED else 0, kind, payload))
    # A run stopped from outside (cancel, a job Ray lost) ends without a run_finished event.
    for run_id, at in RunStateChange.objects.filter(run_id__in=marks, state__in=FINAL_STATES).values_list("run_id", "at"):
        marks[run_id].append((at, 2, "final_state", {}))
    clocks = {}
    for run in runs:
        clock = RunClock()
        for at, _, kind, payload in sorted(marks[run.pk], key=lambda mark: mark[:2]):
            if kind == EventType.RUN_STARTED:
                # A start while one is open: the earlier attempt vanished without an end and its
                # time is unknown, so none of it is counted.
                clock.running_since, clock.has_started = at, True
                total = payload.get("total_steps")
                clock.total_steps = total if isinstance(total, int) and not isinstance(total, bool) else clock.total_steps
            elif clock.running_since is not None:
                clock.trained_s += max(0.0, (at - clock.running_since).total_seconds())
                clock.running_since = None
        if clock.running_since is not None and run.is_final:
            clock.trained_s += max(0.0, ((run.finished_at or clock.running_since) - clock.running_since).total_seconds())
            clock.running_since = None
        if not clock.has_started and run.started_at:  # events already pruned: the state machine's times
            clock.has_started = True
            if run.finished_at:
                clock.trained_s = max(0.0, (run.finished_at - run.started_at).total_seconds())
            else:
                clock.running_since = run.started_at
        if clock.total_steps is None and run.kind == RunKind.RL:
            clock.total_steps = run.planned_steps  # before the trainer announces it: the same rule
        clocks[run.pk] = clock
    return clocks


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


def latest_evaluation_values(run_ids: list[int]) -> dict[int, dict]:
    """Run → the values of its latest evaluation, for the runs that have one, in one query."""
    latest = Evaluation.objects.filter(run_id__in=run_ids).order_by("run_id", "-step").distinct("run_id")
    return {evaluation.run_id: evaluation.values for evaluation in latest}


def run_summaries(runs: list[Run]) -> list[dict]:
    """One row of the runs list per run, JSON-ready (the page renders it, the live poll refreshes it). An evaluation
    trains nothing, so it has no reward to show: its row carries its pass@k instead."""
    metrics = recent_metrics([run.pk for run in runs])
    evaluations = latest_evaluation_values([run.pk for run in runs if run.kind == RunKind.EVAL])
    clocks = run_clocks(runs)
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
            "kind": run.kind,
            "kind_label": run.get_kind_display(),
            "pass_at_k": headline_pass_at_k(evaluations[run.pk]) if run.pk in evaluations else None,
            "step": run.current_step,
            "total_steps": clocks[run.pk].total_steps,
            "reward": rewards[-1] if rewards else None,
            "accuracy": accuracies[-1] if accuracies else None,
            "reward_series": rewards,
            "accuracy_series": accuracies,
            "elapsed_s": clocks[run.pk].elapsed_s(now),
            "created_at": run.created_at.isoformat(),
        })
    return summaries


def metric_series(run: Run) -> dict:
    """Every step's metrics and every evaluation, for the run page's charts. Each step's metrics say the attempt
    that published them (None where its event is gone): a step's ``time/phases`` are on its attempt's clock."""
    attempts = step_attempts(run)
    return {
        "metrics": [{"step": m.step, "attempt": attempts.get(m.step), "values": m.values} for m in run.step_metrics.all()],
        "evaluations": [{"step": e.step, "values": e.values} for e in run.evaluations.all()],
    }


def step_attempts(run: Run) -> dict[int, int]:
    """Step → the attempt whose ``metrics`` event the step's stored metrics are: the latest stored (a resumed
    attempt that trains a step again replaces the earlier attempt's metrics, as the ingester does)."""
    rows = (RunEvent.objects.filter(run=run, type=EventType.METRICS).order_by("run_seq")
            .values_list("payload__step", "attempt"))
    return {step: attempt for step, attempt in rows if isinstance(step, int)}


# What the trainer log shows: its log lines and errors, and the milestones of the run (run.js words them).
LOGGED_EVENTS = (EventType.LOG, EventType.ERROR, EventType.RUN_STARTED, EventType.CHECKPOINT_SAVED,
                 EventType.EVALUATION, EventType.RUN_FINISHED)


def log_lines(run: Run, limit: int = LOG_LINES_SHOWN) -> list[dict]:
    """The trainer's latest log lines, errors and milestones, oldest first, in the shape the WebSocket delivers them."""
    events = list(RunEvent.objects.filter(run=run, type__in=LOGGED_EVENTS).order_by("-pk")[:limit])
    return [{"id": e.pk, "number": e.run_seq, "type": e.type, "time": e.published_at.timestamp(),
             "payload": _without_config(e.payload)}
            for e in reversed(events)]


def _without_config(payload: dict) -> dict:
    # run_started carries the whole resolved config; the page shows it in its own table.
    return {key: value for key, value in payload.items() if key != "config"}


def compute_precision(run: Run) -> dict | None:
    """What the trainer computes in and why (its latest run_started's ``compute_dtype``, see
    trainer/compute_dtype.py): resolved by the trainer on the machine that trains, never guessed here,
    where the web process's CPU says nothing about the worker's. None until a trainer has started."""
    return _latest_start(run).get("compute_dtype") or None


def rollout_engine(run: Run) -> dict | None:
    """The engine the trainer samples with (its latest run_started's ``rollout_engine``, see
    trainer/rollout/vllm_platform.py): the one the config asks for, or the fallback it names and why, decided on the
    node that runs it. None until a trainer has started (and for runs from before the trainer said)."""
    return _latest_start(run).get("rollout_engine") or None


def _latest_start(run: Run) -> dict:
    """The payload of the trainer's latest run_started (a resumed attempt may run on another machine), or {}."""
    event = RunEvent.objects.filter(run=run, type=EventType.RUN_STARTED).order_by("-pk").first()
    return event.payload if event else {}


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


def last_event_number(run_id: int) -> int:
    """The run's highest ``run_seq`` stored (0 before any): the page asks for what comes after it."""
    return RunEvent.objects.filter(run_id=run_id).order_by("-run_seq").values_list("run_seq", flat=True).first() or 0


EVENT_PAGE_LIMIT = 500  # events per page of a replay: a browser far behind asks again, page by page


def events_after(run_id: int, after: int, limit: int = EVENT_PAGE_LIMIT) -> list[dict]:
    """The run's events numbered after ``after``, oldest first, at most ``limit`` (capped at
    EVENT_PAGE_LIMIT), as a watching browser receives them."""
    limit = max(1, min(limit, EVENT_PAGE_LIMIT))
    events = list(RunEvent.objects.filter(run_id=run_id, run_seq__gt=after).order_by("run_seq")[:limit])
    attempt_ids = rollouts.attempt_ids(e.pk for e in events)
    for event in events:
        event.attempt_id = attempt_ids.get(event.pk)
    return [browser_message(event) for event in events]


def dead_letter_count(run: Run) -> int:
    return run.dead_letters.count()


def checkpoints(run: Run) -> list[Checkpoint]:
    """The run's checkpoints, each with ``size_bytes`` and ``model_size_bytes`` (None: not on this machine)."""
    rows = list(run.checkpoints.all())
    for checkpoint in rows:
        checkpoint.size_bytes = folder_size(checkpoint.path)
        checkpoint.model_size_bytes = folder_size(checkpoint.model_folder)
    return rows


def evaluation_schedule(run: Run, total_steps: int | None) -> str:
    """When this run evaluates, in words, for an evaluation chart that is still empty."""
    every = (run.config.get("schedule") or {}).get("eval_every") or 0
    if not every:
        return "This run does not evaluate (schedule.eval_every is 0)."
    if total_steps is not None and total_steps < every:
        return (f"This run evaluates every {every} steps and has only {total_steps}, so it will not evaluate: "
                f"set schedule.eval_every to at most {total_steps} to see an evaluation.")
    return f"This run evaluates every {every} steps; the first evaluation comes after step {every}."


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


PROMPTSET_SETTING = "promptset version"


def run_differences(run: Run, other: Run) -> list[dict]:
    """How ``other`` differs from ``run``: the promptset version each trained or was evaluated on (a run's data lives
    beside its configuration, not in it), then the configuration's settings, in config_diff's rows."""
    rows = []
    if run.promptset_version_id != other.promptset_version_id:
        rows.append({"path": PROMPTSET_SETTING, "this": promptset_version_name(run),
                     "other": promptset_version_name(other), "only_in": ""})
    return rows + config_diff(run.public_config, other.public_config)


def promptset_version_name(run: Run) -> str:
    # Two people's promptsets may share a name: the version's number in the database tells them apart.
    return f"{run.promptset_version} (#{run.promptset_version_id})"


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def waiting_reason(run: Run, viewer) -> str:
    """What a queued or starting run waits for, in words; empty once it runs or has ended. The run
    page's one answer to "why is it waiting".

    A queued run waits for the scheduler (its reason: a paused queue, its owner's quota) until it is
    admitted, then for a worker. A starting run: asks Ray, since a job whose resources are taken
    stays PENDING, and the page should say so rather than "submitting" for minutes.
    """
    if run.state == RunState.QUEUED:
        if run.admitted_at is None:
            return f"In the queue: {run.waiting_for}."
        return "Queued: admitted, waiting for a platform worker to submit it to the Ray cluster."
    if run.state != RunState.STARTING:
        return ""
    if not run.ray_job_id:
        return "Starting: checking the cluster's resources and submitting the job to Ray."
    try:
        status = ray_jobs.status(run.ray_job_id)
    except Exception as error:  # noqa: BLE001 - the page must still render when Ray does not answer
        return f"Starting: the Ray cluster did not say how the job is doing ({error})."
    if status.state != "PENDING":
        return f"Starting: the Ray job is {status.state.lower()}; the trainer is loading the model."
    wanted = cluster.requested_resources(run.resolved_config, run.kind)
    needs = f"{wanted['num_cpus']:g} CPU{'s' if wanted['num_cpus'] != 1 else ''}"
    if wanted["num_gpus"]:
        needs += f" and {wanted['num_gpus']:g} GPU{'s' if wanted['num_gpus'] != 1 else ''}"
    holders = Run.objects.filter(state__in=(RunState.STARTING, RunState.RUNNING)).exclude(pk=run.pk).exclude(ray_job_id="")
    visible = set(Run.objects.visible_to(viewer).filter(pk__in=holders).values_list("pk", flat=True))
    named = [f"#{other.pk} “{other.name}”" if other.pk in visible else "a run you cannot see" for other in holders[:5]]
    held_by = f" They are held by {', '.join(named)}." if named else ""
    return (f"Waiting for the cluster: the job needs {needs}, and Ray holds it as pending until they are free."
            f"{held_by} It starts by itself when they are.")


def stored_rollout_keys(run_id: int, keys) -> list[str]:
    """Which of ``keys`` the run already has as stored ``rollout_finished`` events."""
    return list(RunEvent.objects.filter(run_id=run_id, type=EventType.ROLLOUT_FINISHED, payload__rollout_key__in=list(keys))
                .values_list("payload__rollout_key", flat=True))


def stored_attempt(run_id: int, rollout_key: str) -> tuple[int | None, bool]:
    """(the proof attempt a stored rollout became or None, whether the rollout is stored at all)."""
    event_id = (RunEvent.objects.filter(run_id=run_id, type=EventType.ROLLOUT_FINISHED, payload__rollout_key=rollout_key)
                .values_list("pk", flat=True).first())
    if event_id is None:
        return None, False
    return rollouts.attempt_ids([event_id]).get(event_id), True
