"""Fixtures of the deployment tests: the manifests on disk and a throwaway local Ray head."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
DEPLOY_DIR = REPO_DIR / "deploy"

# platform/ is a source root (never a package); the lead's tests/conftest.py may already add it.
for source_root in (REPO_DIR / "platform", REPO_DIR):
    if str(source_root) not in sys.path:
        sys.path.insert(0, str(source_root))

# A child process owns the Ray head so that ray.shutdown() there stops exactly the processes
# it started; `ray stop` would also stop every other Ray cluster on this shared machine.
_RAY_HEAD_SCRIPT = """
import json, sys, ray
context = ray.init(
    address="local", num_cpus=2, num_gpus=int(sys.argv[1]), object_store_memory=100_000_000,
    include_dashboard=True, dashboard_host="127.0.0.1", dashboard_port=0,
    log_to_driver=False, configure_logging=False,
)
print(json.dumps({"dashboard_url": "http://" + context.dashboard_url}), flush=True)
sys.stdin.read()
ray.shutdown()
"""


@dataclass(frozen=True)
class LocalRayHead:
    dashboard_url: str
    auth_token: str


@pytest.fixture(scope="session")
def local_ray_head(tmp_path_factory):
    """A two-CPU Ray head that declares 2 logical GPUs (Ray schedules by declared resources, so no
    card is needed), with token authentication on as in production."""
    auth_token = secrets.token_hex(16)
    # With the token given, Ray writes no ~/.ray/auth_token; the private HOME makes sure, since
    # that file would switch on token auth for every other Ray cluster started on this machine.
    environment = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_DISABLE_DOCKER_CPU_WARNING="1",
                       RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=auth_token, HOME=str(tmp_path_factory.mktemp("ray-home")))
    environment.pop("RAY_ADDRESS", None)  # the suite points it at the embedded head
    head = subprocess.Popen(
        [sys.executable, "-c", _RAY_HEAD_SCRIPT, "2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=environment,
    )
    try:
        line = head.stdout.readline()
        if not line:
            pytest.fail(f"the local Ray head exited with code {head.wait(timeout=30)} before it printed its address")
        dashboard_url = json.loads(line)["dashboard_url"]
        _wait_for_dashboard(dashboard_url, auth_token)
        yield LocalRayHead(dashboard_url, auth_token)
    finally:
        head.stdin.close()
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()


def _wait_for_dashboard(dashboard_url: str, auth_token: str, timeout_s: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{dashboard_url}/api/version", headers={"Authorization": f"Bearer {auth_token}"},
                         timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            pytest.fail(f"the local Ray dashboard at {dashboard_url} did not answer within {timeout_s:.0f} s")
        time.sleep(0.3)
