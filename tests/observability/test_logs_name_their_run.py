"""Log lines are JSON objects (LOG_FORMAT=json) that carry the run they concern, whichever process
wrote them: a worker inside ``about_run``, or a web request about one run."""

import io
import json
import logging

import pytest

from config.logs import RunIdFilter, RunJsonFormatter, about_run, logging_config


@pytest.fixture
def json_lines():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(RunJsonFormatter())
    handler.addFilter(RunIdFilter())
    root = logging.getLogger()
    root.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.removeHandler(handler)


def test_a_line_written_about_a_run_carries_its_id_and_others_carry_none(json_lines):
    log = logging.getLogger("runs.ingest")
    with about_run(42):
        log.warning("stored %d events", 3)
    log.warning("idle")
    first, second = json_lines()
    assert first["message"] == "stored 3 events" and first["run_id"] == 42
    assert first["level"] == "WARNING" and first["logger"] == "runs.ingest" and "time" in first
    assert second["run_id"] is None


@pytest.mark.django_db
def test_a_web_request_about_a_run_logs_with_its_id(client, alice, json_lines):
    client.force_login(alice)
    assert client.get("/runs/987654/").status_code == 404
    assert client.get("/api/runs/987655").status_code == 404
    lines = [line for line in json_lines() if line["logger"] == "django.request"]
    assert [line["run_id"] for line in lines] == [987654, 987655]
    client.get("/promptsets/987656/")
    assert json_lines()[-1]["run_id"] is None  # nothing carries over to the next request


def test_the_settings_choose_json_or_text():
    assert logging_config("json", "INFO")["formatters"]["platform"] == {"()": "config.logs.RunJsonFormatter"}
    assert "[run {run_id}]" in logging_config("text", "INFO")["formatters"]["platform"]["format"]
