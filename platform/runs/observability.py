"""What operators watch: liveness, readiness of each dependency, and Prometheus metrics.

- ``/healthz``: the web process answers and its database does (load balancers, compose).
- ``/readyz`` and ``/readyz/<dependency>``: the database, Redis, Ray's job API and the Lean
  server, each checked with a short timeout; 503 naming what failed, so a deploy waits for them.
- ``/metrics``: Prometheus text format, computed from the database and Redis at scrape time
  (no process-local counters, which would differ between web workers). It is behind a bearer
  token (``METRICS_TOKEN``) or a staff login, since run names and counts are not public.
"""

from __future__ import annotations

import hmac
import time

import httpx
import redis
from django.conf import settings
from django.db import connection
from django.db.models import Count
from django.http import HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from runs.cluster import ray_version
from runs.models import DeadLetter, Run, RunState, StepMetrics
from runs.streams import entry_milliseconds, stream_backlog
from trainer.observability.events import stream_key

CHECK_TIMEOUT_S = 3.0


def health(request):
    """Liveness: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


# --- readiness ---------------------------------------------------------------------------------


def _check_database() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return "answers"


def _check_redis() -> str:
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=CHECK_TIMEOUT_S,
                                  socket_connect_timeout=CHECK_TIMEOUT_S)
    try:
        client.ping()
    finally:
        client.close()
    return "answers PING"


def _check_ray() -> str:
    # The same client as the job and state calls: the cluster's token, RAY_ADDRESS checked the same way.
    version = ray_version(settings.RAY_ADDRESS, timeout_s=CHECK_TIMEOUT_S)
    return f"job API answers (Ray {version.get('ray_version', '?')})"


def _check_lean_server() -> str:
    headers = {"Authorization": f"Bearer {settings.LEAN_SERVER_API_KEY}"} if settings.LEAN_SERVER_API_KEY else {}
    response = httpx.get(f"{settings.LEAN_SERVER_URL.rstrip('/')}/health", headers=headers, timeout=CHECK_TIMEOUT_S)
    response.raise_for_status()
    return "answers (stand-in)" if settings.LEAN_SERVER_IS_STANDIN else "answers"


DEPENDENCY_CHECKS = {
    "database": _check_database,
    "redis": _check_redis,
    "ray": _check_ray,
    "lean-server": _check_lean_server,
}


def _run_check(name: str) -> dict:
    started = time.perf_counter()
    try:
        detail = DEPENDENCY_CHECKS[name]()
        ok = True
    except Exception as error:  # noqa: BLE001 - any failure means "not ready"; say which and why
        detail = f"{type(error).__name__}: {error}".strip()
        ok = False
    return {"ok": ok, "detail": detail, "seconds": round(time.perf_counter() - started, 3)}


def readiness(request, dependency: str | None = None):
    if dependency is not None and dependency not in DEPENDENCY_CHECKS:
        return JsonResponse({"error": f"unknown dependency {dependency!r}; one of {', '.join(DEPENDENCY_CHECKS)}"},
                            status=404)
    names = [dependency] if dependency else list(DEPENDENCY_CHECKS)
    checks = {name: _run_check(name) for name in names}
    is_ready = all(check["ok"] for check in checks.values())
    return JsonResponse({"status": "ready" if is_ready else "not ready", "checks": checks},
                        status=200 if is_ready else 503)


# --- Prometheus metrics ------------------------------------------------------------------------


class PlatformCollector:
    """Reads the platform's state when Prometheus scrapes; every figure is labelled with its unit."""

    def collect(self):
        runs = GaugeMetricFamily("leanrl_runs", "Runs by state.", labels=["state"])
        counts = dict(Run.objects.values_list("state").annotate(n=Count("pk")).values_list("state", "n"))
        for state in RunState:
            runs.add_metric([state.value], counts.get(state.value, 0))
        yield runs
        yield GaugeMetricFamily("leanrl_run_queue_length", "Runs waiting to be dispatched (state queued).",
                                value=counts.get(RunState.QUEUED.value, 0))

        yield GaugeMetricFamily("leanrl_dead_letters", "Event stream entries the ingester could not store "
                                "(runs.DeadLetter; read them in the admin).", value=DeadLetter.objects.count())
        yield from self._ingester_metrics()
        yield from self._verifier_metrics()

    def _active_run_ids(self) -> list[int]:
        return list(Run.objects.active().values_list("pk", flat=True))

    def _ingester_metrics(self):
        """Entries of active runs' streams not yet acknowledged by the ingester, and the age of the oldest."""
        pending = GaugeMetricFamily("leanrl_ingester_pending_entries",
                                    "Stream entries of active runs delivered to no ingester or not yet acknowledged.")
        lag = GaugeMetricFamily("leanrl_ingester_lag_seconds",
                                "Age of the oldest event of an active run that the ingester has not stored yet.")
        reachable = GaugeMetricFamily("leanrl_redis_up", "1 when Redis answered this scrape.")
        client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=CHECK_TIMEOUT_S,
                                      socket_connect_timeout=CHECK_TIMEOUT_S)
        total, oldest_ms = 0, None
        try:
            for run_id in self._active_run_ids():
                backlog = stream_backlog(client, stream_key(str(run_id)))
                if backlog is None:
                    continue  # nothing published yet
                total += backlog.unacknowledged
                if backlog.oldest_id is not None:
                    first_ms = entry_milliseconds(backlog.oldest_id)
                    oldest_ms = first_ms if oldest_ms is None else min(oldest_ms, first_ms)
        except redis.RedisError:
            reachable.add_metric([], 0)
            yield reachable
            return  # not measured: no pending or lag figure rather than a false 0
        finally:
            client.close()
        reachable.add_metric([], 1)
        pending.add_metric([], total)
        lag.add_metric([], 0.0 if oldest_ms is None else max(0.0, time.time() - oldest_ms / 1000))
        yield from (reachable, pending, lag)

    def _verifier_metrics(self):
        """Per active run, from its latest step: Lean seconds per proof and the censored share."""
        latency = GaugeMetricFamily("leanrl_verifier_seconds_per_proof",
                                    "Mean Lean verification seconds per rollout in the run's latest step.",
                                    labels=["run"])
        censored = GaugeMetricFamily("leanrl_verifier_censored_share",
                                     "Share of the latest step's rollouts whose verdict was censored "
                                     "(server unreachable, server error, stand-in cannot decide).", labels=["run"])
        latest = (StepMetrics.objects.filter(run__in=self._active_run_ids())
                  .order_by("run_id", "-step").distinct("run_id"))
        for row in latest:
            rollouts = row.values.get("rollouts") or 0
            if not rollouts:
                continue  # a step without rollouts measured nothing
            total_s = row.values.get("time/verification_total_s")
            if total_s is not None:
                latency.add_metric([str(row.run_id)], total_s / rollouts)
            if row.values.get("censored") is not None:
                censored.add_metric([str(row.run_id)], row.values["censored"] / rollouts)
        yield latency
        yield censored


def _is_authorised_scraper(request) -> bool:
    token = getattr(settings, "METRICS_TOKEN", None)
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:], token):
        return True
    return request.user.is_authenticated and request.user.is_staff


def metrics(request):
    if not _is_authorised_scraper(request):
        return HttpResponse("metrics need 'Authorization: Bearer <METRICS_TOKEN>' or a staff login\n",
                            status=401, content_type="text/plain")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PlatformCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
