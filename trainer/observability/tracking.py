"""Experiment tracking: the run's events mirrored to Weights & Biases, MLflow or TensorBoard.

A ``TrackingSink`` sits in front of the run's own event sink (Redis or stdout), which always
receives every event first: the platform's record never depends on a tracker. Each tracker sees
the resolved config when the run starts, every step's metrics and every evaluation as scalars at
their step, a sample table of rollouts (prompt, reasoning, code, verdict, reward) every
``tracking.rollout_table_every`` steps, and the run's end. A tracker that fails (its server
unreachable, a full disk) is switched off with a warning in the run's log; training goes on.

Where each one writes comes from the libraries' own environment variables, which the platform
sets on the Ray job (``WANDB_API_KEY``, ``WANDB_MODE``, ``WANDB_BASE_URL``, ``MLFLOW_TRACKING_URI``):
keys never sit in the config or on a command line. Without them, W&B runs offline into
``<output>/wandb``, MLflow writes a local SQLite store, ``<output>/mlflow.db`` and TensorBoard always
writes event files into ``<output>/tensorboard``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from trainer.config import RunConfig, TrackingBackend
from trainer.observability.events import EventPublisher, EventSink, EventType, TrainerEvent

logger = logging.getLogger(__name__)

# Not "rollouts": that is already a step metric (how many rollouts the step had).
TABLE_KEY = "rollout_samples"
TABLE_COLUMNS = ("step", "problem", "turn", "prompt", "reasoning", "lean_code", "verdict", "reward")
# A prompt or a reasoning block can be 24k tokens; the table is for skimming, the run page has the rest.
TABLE_CELL_CHARS = 4000


class Tracker(Protocol):
    backend: TrackingBackend
    location: str  # where to look: a URL, or a folder for offline stores

    def start(self, config: dict[str, Any]) -> None: ...
    def log_scalars(self, step: int, values: dict[str, float]) -> None: ...
    def log_table(self, step: int, rows: list[dict[str, Any]]) -> None: ...
    def finish(self, status: str) -> None: ...


def scalars(values: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Numbers of a metrics payload, nested dicts flattened with '/'; booleans and text left out."""
    flat: dict[str, float] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(scalars(value, prefix=f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(flat_config(value, prefix=f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _cell(value: Any) -> Any:
    if isinstance(value, str) and len(value) > TABLE_CELL_CHARS:
        return value[:TABLE_CELL_CHARS] + f"… [{len(value) - TABLE_CELL_CHARS} more characters]"
    return value


class WandbTracker:
    backend = TrackingBackend.WANDB

    def __init__(self, project: str, run_name: str, output: Path):
        self.project, self.run_name, self.output = project, run_name, output
        self.run = None
        self.location = ""

    def start(self, config):
        import wandb

        directory = self.output / "wandb"
        directory.mkdir(parents=True, exist_ok=True)
        # Offline unless the deployment gave a key or a mode: the trainer never needs the network.
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self.run = wandb.init(project=self.project, name=self.run_name, config=config, dir=str(directory),
                              mode=mode, reinit="create_new")
        self.location = self.run.url or str(Path(self.run.dir).parent)

    def log_scalars(self, step, values):
        self.run.log(values, step=step)

    def log_table(self, step, rows):
        import wandb

        table = wandb.Table(columns=list(TABLE_COLUMNS), data=[[row[c] for c in TABLE_COLUMNS] for row in rows])
        self.run.log({TABLE_KEY: table}, step=step)

    def finish(self, status):
        self.run.summary["status"] = status
        self.run.finish(exit_code=0 if status == "succeeded" else 1)


class MlflowTracker:
    backend = TrackingBackend.MLFLOW

    def __init__(self, project: str, run_name: str, output: Path):
        self.project, self.run_name, self.output = project, run_name, output
        self.client = None
        self.run_id = ""
        self.location = ""

    def start(self, config):
        from mlflow.tracking import MlflowClient

        uri = os.environ.get("MLFLOW_TRACKING_URI") or local_mlflow_uri(self.output)
        self.client = MlflowClient(tracking_uri=uri)
        experiment = self.client.get_experiment_by_name(self.project)
        # A local store keeps its artifacts in the run's folder too (MLflow's default is ./mlruns of
        # whatever folder the process started in); a tracking server decides for itself.
        artifacts = None if os.environ.get("MLFLOW_TRACKING_URI") else (self.output / "mlflow-artifacts").resolve().as_uri()
        experiment_id = (experiment.experiment_id if experiment
                         else self.client.create_experiment(self.project, artifact_location=artifacts))
        run = self.client.create_run(experiment_id, run_name=self.run_name)
        self.run_id = run.info.run_id
        # MLflow params are short strings; the whole config also goes in as one artifact.
        from mlflow.entities import Param

        params = [Param(key, str(value)[:500]) for key, value in flat_config(config).items()]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[start:start + 100])
        self.client.log_dict(self.run_id, config, "run_config.json")
        self.location = f"{uri}#experiment={experiment_id}&run={self.run_id}"

    def log_scalars(self, step, values):
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(_mlflow_key(key), value, now, step) for key, value in values.items()]
        for start in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + 1000])

    def log_table(self, step, rows):
        self.client.log_table(self.run_id, data={c: [row[c] for row in rows] for c in TABLE_COLUMNS},
                              artifact_file=f"{TABLE_KEY}/step_{step:06d}.json")

    def finish(self, status):
        self.client.set_terminated(self.run_id, status="FINISHED" if status == "succeeded" else
                                   ("KILLED" if status == "cancelled" else "FAILED"))


def local_mlflow_uri(output: Path) -> str:
    """MLflow's own local store (SQLite; its plain-folder store is deprecated) in the run's folder."""
    return f"sqlite:///{(output / 'mlflow.db').resolve()}"


def _mlflow_key(key: str) -> str:
    # MLflow keys allow letters, digits, _ - . space / : only.
    return "".join(ch if ch.isalnum() or ch in "_-. /:" else "_" for ch in key)


class TensorBoardTracker:
    backend = TrackingBackend.TENSORBOARD

    def __init__(self, project: str, run_name: str, output: Path):
        self.directory = output / "tensorboard"
        self.writer = None
        self.location = str(self.directory)

    def start(self, config):
        import json

        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(self.directory))
        self.writer.add_text("config", "```json\n" + json.dumps(config, indent=2) + "\n```", 0)

    def log_scalars(self, step, values):
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def log_table(self, step, rows):
        from html import escape

        header = "| " + " | ".join(TABLE_COLUMNS) + " |\n|" + "---|" * len(TABLE_COLUMNS) + "\n"
        # Markdown table cells: model output is escaped and kept on one line.
        body = "".join("| " + " | ".join(escape(str(row[c])).replace("\n", "<br>").replace("|", "&#124;")
                                         for c in TABLE_COLUMNS) + " |\n" for row in rows)
        self.writer.add_text(TABLE_KEY, header + body, step)
        self.writer.flush()

    def finish(self, status):
        self.writer.add_text("status", status)
        self.writer.close()


TRACKERS = {
    TrackingBackend.WANDB: WandbTracker,
    TrackingBackend.MLFLOW: MlflowTracker,
    TrackingBackend.TENSORBOARD: TensorBoardTracker,
}


class TrackingSink:
    """Passes every event on to the run's own sink, then mirrors it to the trackers."""

    def __init__(self, inner: EventSink, trackers: Iterable[Tracker], *, table_every: int, table_rows: int,
                 on_tracker_event=None):
        self.inner = inner
        self.trackers = list(trackers)
        self.table_every = table_every
        self.table_rows = table_rows
        self.on_tracker_event = on_tracker_event  # publishes TRACKING events (where to look, or a failure)
        self._table: dict[int, list[dict[str, Any]]] = {}

    def write(self, event: TrainerEvent) -> None:
        self.inner.write(event)
        if event.type == EventType.TRACKING:
            return
        payload = event.payload
        if event.type == EventType.RUN_STARTED:
            self._each(lambda tracker: tracker.start(payload.get("config", {})), announce=True)
        elif event.type == EventType.METRICS:
            step = int(payload["step"])
            values = scalars(payload.get("values", {}))
            self._each(lambda tracker: tracker.log_scalars(step, values))
            rows = self._table.pop(step, None)
            if rows:
                self._each(lambda tracker: tracker.log_table(step, rows))
        elif event.type == EventType.EVALUATION:
            step = int(payload["step"])
            values = scalars(payload.get("values", {}), prefix="eval/")
            self._each(lambda tracker: tracker.log_scalars(step, values))
        elif event.type == EventType.ROLLOUT_FINISHED:
            self._collect_row(payload)
        elif event.type == EventType.RUN_FINISHED:
            status = payload.get("status", "failed")
            self._each(lambda tracker: tracker.finish(status))
            self.trackers = []

    def _collect_row(self, payload: dict[str, Any]) -> None:
        step = int(payload.get("step", 0))
        if not self.table_every or step % self.table_every:
            return
        if payload.get("is_evaluation"):
            return  # the table is the step's training rollouts; its evaluation's figures go as eval/ scalars
        rows = self._table.setdefault(step, [])
        if len(rows) < self.table_rows:
            rows.append({
                "step": step, "problem": payload.get("problem_name") or payload.get("problem_id", ""),
                "turn": payload.get("turn", ""), "prompt": _cell(payload.get("prompt", "")),
                "reasoning": _cell(payload.get("reasoning", "")), "lean_code": _cell(payload.get("lean_code", "")),
                "verdict": payload.get("verdict") or payload.get("format_error") or "",
                # A censored rollout has no reward: an empty cell, never 0.
                "reward": "" if payload.get("reward") is None else payload["reward"],
            })

    def _each(self, call, *, announce: bool = False) -> None:
        for tracker in list(self.trackers):
            try:
                call(tracker)
            except Exception as error:  # noqa: BLE001 - a tracker's outage must not stop training
                self.trackers.remove(tracker)
                logger.warning("tracking with %s switched off: %s", tracker.backend.value, error)
                self._announce(tracker, f"switched off after an error: {type(error).__name__}: {error}")
            else:
                if announce:
                    self._announce(tracker, "")

    def _announce(self, tracker: Tracker, problem: str) -> None:
        if self.on_tracker_event is not None:
            self.on_tracker_event({"backend": tracker.backend.value, "location": tracker.location,
                                   "error": problem})


def attach_trackers(publisher: EventPublisher, config: RunConfig, output: Path) -> None:
    """Wrap the publisher's sink so that the run's configured trackers see its events (rank 0 only)."""
    tracking = config.tracking
    if not tracking.backends:
        return
    run_name = tracking.run_name or f"run-{publisher.run_id}"
    trackers = [TRACKERS[backend](tracking.project, run_name, output) for backend in tracking.backends]
    publisher.sink = TrackingSink(
        publisher.sink, trackers, table_every=tracking.rollout_table_every, table_rows=tracking.rollout_table_rows,
        on_tracker_event=lambda payload: publisher.publish(EventType.TRACKING, payload),
    )
