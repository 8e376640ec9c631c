"""Production hardening: `check --deploy` is silent, the proxy sets the forwarded headers and is the
only one trusted with them, and secrets stay off command lines."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.submitted_jobs import submitted_body

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "deploy/compose/compose.yaml").read_text())
NGINX = (REPO / "deploy/compose/nginx.conf").read_text()


def test_manage_py_check_deploy_finds_no_issue_in_production():
    env = {**os.environ, "DJANGO_ENV": "production", "DJANGO_SECRET_KEY": secrets.token_urlsafe(60),
           "DJANGO_ALLOWED_HOSTS": "lean.example.org", "DJANGO_DEBUG": "0"}
    result = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_nginx_sets_the_forwarded_headers_from_the_connection_and_never_passes_the_clients_on():
    assert "$proxy_add_x_forwarded_for" not in NGINX and "$http_x_forwarded" not in NGINX
    assert "proxy_set_header X-Forwarded-For $remote_addr;" in NGINX
    assert "proxy_set_header X-Forwarded-Proto $scheme;" in NGINX
    assert "listen 8443 ssl;" in NGINX and "return 301 https://$host$request_uri;" in NGINX


def test_uvicorn_trusts_forwarded_headers_only_from_the_proxys_fixed_address():
    command = COMPOSE["services"]["web"]["command"]
    trusted = command[command.index("--forwarded-allow-ips") + 1]
    proxy_address = COMPOSE["services"]["proxy"]["networks"]["default"]["ipv4_address"]
    assert trusted == proxy_address == "${PROXY_ADDRESS:-172.28.0.10}"
    dockerfile = (REPO / "deploy/docker/platform.Dockerfile").read_text()
    assert not re.search(r'forwarded-allow-ips"?,?\s*"\*"', dockerfile)
    for manifest in (REPO / "deploy/k8s").glob("*.yaml"):
        assert '"--forwarded-allow-ips", "*"' not in manifest.read_text(), manifest.name


@pytest.mark.django_db
def test_the_redis_password_reaches_the_ray_job_through_its_environment_not_its_command_line(
        make_run, settings, monkeypatch):
    from runs import ray_jobs

    settings.TRAINER_REDIS_URL = "redis://:hunter2-secret@redis:6379/0"
    run = make_run()
    entrypoint = ray_jobs.trainer_entrypoint(run)
    assert "hunter2-secret" not in entrypoint and "--events env:LEANRL_EVENTS_URL" in entrypoint

    submitted = submitted_body(run, monkeypatch)
    assert submitted["runtime_env"]["env_vars"]["LEANRL_EVENTS_URL"] == settings.TRAINER_REDIS_URL
    assert "hunter2-secret" not in submitted["entrypoint"] and "hunter2-secret" not in str(submitted["metadata"])


def test_the_trainer_reads_an_env_events_target_and_names_a_missing_variable(monkeypatch):
    from trainer.commands import event_target

    monkeypatch.setenv("LEANRL_EVENTS_URL", "redis://:pw@redis:6379/0")
    assert event_target.resolve("env:LEANRL_EVENTS_URL") == "redis://:pw@redis:6379/0"
    assert event_target.resolve("stdout") == "stdout"
    monkeypatch.delenv("LEANRL_EVENTS_URL")
    with pytest.raises(ValueError, match="LEANRL_EVENTS_URL, which is unset"):
        event_target.resolve("env:LEANRL_EVENTS_URL")


def test_the_run_started_event_that_reaches_browsers_carries_no_lean_server_address():
    from trainer.config import RunConfig

    config = RunConfig.from_preset("cpu-smoke", {"verifier": {"url": "http://lean.internal:12332", "api_key": "k"}})
    public = config.to_public_dict()
    assert "url" not in public["verifier"] and "api_key" not in public["verifier"]
    assert "lean.internal" not in str(public) and public["verifier"]["max_in_flight"] == 8
