"""Log lines that machines can read: JSON objects, each with the run it concerns.

``LOG_FORMAT=json`` (the default in production) writes one JSON object per line with the time, level,
logger, message and ``run_id``; ``text`` keeps Django's plain lines for a terminal. The run id comes
from ``about_run(run_id)``, a context the ingester, the dispatch task and the sweeper enter while they
handle one run, and from the request's URL for a web request about a run, so a log search for one run
finds every process's lines about it.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pythonjsonlogger.json import JsonFormatter

current_run_id: contextvars.ContextVar[int | None] = contextvars.ContextVar("current_run_id", default=None)


@contextmanager
def about_run(run_id: int | str | None) -> Iterator[None]:
    token = current_run_id.set(int(run_id) if run_id is not None else None)
    try:
        yield
    finally:
        current_run_id.reset(token)


class RunIdFilter(logging.Filter):
    """Puts ``run_id`` on every record (None when no run is concerned)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "run_id"):
            record.run_id = current_run_id.get()
        return True


class RunJsonFormatter(JsonFormatter):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("rename_fields", {"asctime": "time", "levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", False)
        super().__init__("{asctime}{levelname}{name}{message}{run_id}", *args, style="{", **kwargs)


class RunLogMiddleware:
    """A web request about one run logs with that run's id."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        current_run_id.set(None)  # a worker thread serves many requests: nothing carries over
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        match = request.resolver_match
        namespace = match.namespaces[0] if match and match.namespaces else ""
        run_id = view_kwargs.get("run_id") if namespace != "runs" else view_kwargs.get("pk")
        if run_id is not None and str(run_id).isdigit():
            current_run_id.set(int(run_id))
        return None


def forget_the_request_run(**kwargs) -> None:
    """On request_finished: the run id stays on the request's own log lines (Django logs a 4xx or 5xx
    after the middleware has returned) and goes with the request."""
    current_run_id.set(None)


def logging_config(log_format: str, level: str) -> dict:
    formatter = {"()": "config.logs.RunJsonFormatter"} if log_format == "json" else {
        "format": "{asctime} {levelname} {name} [run {run_id}] {message}", "style": "{"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"run_id": {"()": "config.logs.RunIdFilter"}},
        "formatters": {"platform": formatter},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "platform", "filters": ["run_id"]}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "WARNING"}},
    }
