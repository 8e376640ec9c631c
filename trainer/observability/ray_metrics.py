"""The trainer's step metrics as Ray metrics, so a Prometheus that scrapes the Ray cluster sees them.

Inside a Ray job (``RAY_ADDRESS`` set by Ray's job supervisor) the first metrics event connects this
process to the cluster and creates one gauge per headline metric, tagged with the run id; Ray's
agents export them on each node's metrics port as ``ray_leanrl_trainer_<name>``. Outside Ray, or if
the cluster does not answer, the sink only passes events on: metrics are a view of the run, never a
reason for it to fail.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading

from trainer.observability.events import EventSink, EventType, TrainerEvent

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0

# What an operator watches across runs; every other value stays in the run's own events.
EXPORTED = {
    "reward/mean": "Mean reward of the step's scored rollouts.",
    "reward/first_attempt": "Mean reward of first attempts.",
    "lean/accuracy": "Share of rollouts that reached Lean and were accepted.",
    "format_error_share": "Share of rollouts that failed the format check.",
    "censored": "Rollouts whose verdict was censored (Lean server failure) in the step.",
    "generation/tokens_per_second": "Rollout tokens generated per second.",
    "learner/tokens_per_second": "Tokens per second through the learner.",
    "learner/grad_norm": "Gradient norm before clipping.",
    "time/generation_s": "Seconds the step spent generating.",
    "time/verification_tail_s": "Seconds the step waited for Lean after generation ended.",
    "time/learning_s": "Seconds the step spent in the learner.",
    "sft_loss": "Supervised fine-tuning loss.",
}


def gauge_name(metric: str) -> str:
    return "leanrl_trainer_" + re.sub(r"[^a-zA-Z0-9_]", "_", metric)


class RayMetricsSink:
    """Passes every event on; sets the run's gauges from each step's metrics when inside a Ray cluster."""

    def __init__(self, inner: EventSink, run_id: str, address: str | None = None):
        self.inner = inner
        self.run_id = str(run_id)
        self.address = address or os.environ.get("RAY_ADDRESS")
        self.gauges: dict | None = None  # None until the first metrics event tries to connect
        self.is_off = not self.address

    def write(self, event: TrainerEvent) -> None:
        self.inner.write(event)
        if event.type != EventType.METRICS or self.is_off:
            return
        try:
            if self.gauges is None:
                self.gauges = self._connect()
            values = event.payload.get("values", {})
            for metric, gauge in self.gauges.items():
                value = values.get(metric)
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    gauge.set(float(value), tags={"run_id": self.run_id})
        except Exception as error:  # noqa: BLE001 - the cluster's metrics are a courtesy: training goes on without them
            self.is_off = True
            logger.warning("Ray metrics switched off for run %s: %s", self.run_id, error)

    def _connect(self) -> dict:
        import socket
        import sys

        loaded = sys.modules.get("ray")
        if loaded is None or not loaded.is_initialized():
            # ray.init waits minutes for a head that does not answer; a step must never wait on metrics. Asked
            # before Ray is imported: a process that loaded Ray's core for nothing may abort as it exits.
            host, _, port = self.address.removeprefix("ray://").rpartition(":")
            with socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_TIMEOUT_S):
                pass

        import ray
        from ray.util.metrics import Gauge

        if not ray.is_initialized():
            # ray.init replaces the process's SIGTERM handler with sys.exit(15) before it connects; ours comes back
            # once it returns. A stop in between comes as SystemExit(15), which the lifecycle reads as the cancel it
            # is (trainer/run/lifecycle.py ``_as_cancel``).
            in_main_thread = threading.current_thread() is threading.main_thread()
            on_sigterm = signal.getsignal(signal.SIGTERM) if in_main_thread else None
            ray.init(address=self.address, log_to_driver=False, logging_level=logging.WARNING,
                     include_dashboard=False, namespace="leanrl-trainer")
            if in_main_thread and on_sigterm is not None:
                signal.signal(signal.SIGTERM, on_sigterm)
        return {metric: Gauge(gauge_name(metric), description=text, tag_keys=("run_id",))
                for metric, text in EXPORTED.items()}


def export_to_ray(publisher) -> None:
    """Wrap the publisher's sink when this process runs as a Ray job (rank 0's publisher)."""
    if os.environ.get("RAY_ADDRESS"):
        publisher.sink = RayMetricsSink(publisher.sink, publisher.run_id)
