"""Real services for the test suite: PostgreSQL, Redis, and on demand a Ray head and the stand-in Lean server.

Loaded with ``-p tests.services_plugin`` (pytest.ini) so that it runs before pytest-django
reads the settings: ports are chosen and the environment set at import time, and the
services start, once per session, the first time a test needs them. Set DATABASE_URL /
REDIS_URL yourself to run against services you already have.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from deploy.services import (
    LeanStandinService,
    PostgresService,
    RayHeadService,
    RedisService,
    free_port,
)

# Under pytest-xdist the workers inherit the controller's environment, with the URLs of services the
# controller chose but never starts: each worker forgets them and starts its own.
_SET_HERE = "LEANRL_TEST_SERVICES_SET_BY_PID"
if os.environ.get(_SET_HERE, str(os.getpid())) != str(os.getpid()):
    for _variable in os.environ.pop("LEANRL_TEST_SERVICES_SET", "").split(","):
        os.environ.pop(_variable, None)
_already_set = set(os.environ)
os.environ[_SET_HERE] = str(os.getpid())
# Every Ray the suite starts (its heads, ray.cluster_utils clusters, a driver's own local Ray) runs without token
# authentication unless a test asks for it (tests/deploy/conftest.py): left unset, Ray's ray.init() of a new local
# cluster writes ~/.ray/auth_token, and every head started after it in that HOME would then demand the token.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

_root = Path(tempfile.mkdtemp(prefix="leanrl-tests-"))
os.chmod(_root, 0o755)
_owns = {}

if "DATABASE_URL" not in os.environ:
    _owns["postgres"] = PostgresService(name="postgres", port=free_port(), log_dir=_root / "logs",
                                        data_dir=_root / "postgres")
    os.environ["DATABASE_URL"] = _owns["postgres"].url
if "REDIS_URL" not in os.environ:
    _owns["redis"] = RedisService(name="redis", port=free_port(), log_dir=_root / "logs", data_dir=_root / "redis")
    os.environ["REDIS_URL"] = _owns["redis"].url

# Short (Ray's socket paths must fit 107 bytes); LEANRL_TEST_RAY_TEMP keeps two checkouts' suites apart on one machine.
_ray_temp = os.environ.get("LEANRL_TEST_RAY_TEMP", "/tmp/ray-tests") + os.environ.get("PYTEST_XDIST_WORKER", "")
_ray = RayHeadService(name="ray", port=free_port(), log_dir=_root / "logs", dashboard_port=free_port(),
                      num_cpus=2, object_store_bytes=150 * 1024 * 1024, temp_dir=Path(_ray_temp))
_lean = LeanStandinService(name="lean-standin", port=free_port(), log_dir=_root / "logs")
os.environ.setdefault("RAY_ADDRESS", _ray.address)
os.environ.setdefault("LEAN_SERVER_URL", _lean.url)
os.environ.setdefault("ARTIFACTS_DIR", str(_root / "artifacts"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# Dataset folders the platform's own processes may import from (tests/promptsets put theirs here).
os.environ.setdefault("PROMPTSET_IMPORT_ROOTS", str(_root / "datasets"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# CPU processes stand in for the GPUs of the layouts under test (several learner ranks, a rollout pool);
# without it a run with cluster.num_gpus > 0 refuses to start on this GPU-less machine (trainer/ranks.py).
os.environ.setdefault("TRAINER_CPU_STANDS_IN_FOR_GPUS", "1")

os.environ["LEANRL_TEST_SERVICES_SET"] = ",".join(sorted(set(os.environ) - _already_set))

TEST_ROOT = _root
# Only a folder this plugin chose (never one named by ARTIFACTS_DIR from outside) is emptied between tests.
_OWN_ARTIFACTS = Path(os.environ["ARTIFACTS_DIR"]) if os.environ["ARTIFACTS_DIR"] == str(_root / "artifacts") else None


@pytest.fixture(autouse=True)
def run_folders_go_with_their_rows():
    """A test's runs and pipelines leave the database when it ends, and their folders leave with them: a later
    test's run must find in ``runs/<id>`` only what it wrote. (In a fresh-machine run two browser tests found another
    run's step records there, ``step-000003-attempt-1.parquet``, and failed.)"""
    yield
    if _OWN_ARTIFACTS is not None:
        for folder in ("runs", "pipelines"):
            shutil.rmtree(_OWN_ARTIFACTS / folder, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def embedded_services():
    """PostgreSQL and Redis, for every test session (a few seconds)."""
    for service in _owns.values():
        service.start()
    yield
    for service in reversed(list(_owns.values())):
        service.stop()


FLUSH_ATTEMPTS = 5


def _flush_that_outlasts_deadlocks(execute_sql_flush):
    """Django empties the database after each transactional test with one TRUNCATE, which takes its
    tables' locks one by one. The platform processes some tests start (the sweeper's scheduler pass every
    2 s, the ingester) read several of those tables in one transaction, so Postgres may find a deadlock
    and end the TRUNCATE. That is the harness's race, not the platform's: try the flush again."""
    from django.db import OperationalError
    from psycopg import errors

    def execute(self, sql_list):
        for attempt in range(1, FLUSH_ATTEMPTS + 1):
            try:
                return execute_sql_flush(self, sql_list)
            except OperationalError as error:
                if not isinstance(error.__cause__, errors.DeadlockDetected) or attempt == FLUSH_ATTEMPTS:
                    raise

    return execute


@pytest.fixture(scope="session", autouse=True)
def flush_outlasts_deadlocks():
    from django.db.backends.postgresql.operations import DatabaseOperations

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(DatabaseOperations, "execute_sql_flush",
                      _flush_that_outlasts_deadlocks(DatabaseOperations.execute_sql_flush))
        yield


@pytest.fixture(scope="session")
def ray_head(embedded_services):
    """A local Ray head with the job API (started once, on first use)."""
    _ray.start()
    yield _ray
    _ray.stop()


@pytest.fixture(scope="session")
def lean_standin(embedded_services):
    """The stand-in Lean server on a loopback port."""
    _lean.start()
    yield _lean
    _lean.stop()


def pytest_unconfigure(config):
    for service in (_ray, _lean, *_owns.values()):
        service.stop()
    shutil.rmtree(_root, ignore_errors=True)


def _platform_env() -> dict:
    """The environment for platform processes started by tests: the test database, this session's services."""
    from django.conf import settings as django_settings
    from django.db import connection

    db = connection.settings_dict
    return {
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "REDIS_URL": django_settings.REDIS_URL,
        "RAY_ADDRESS": django_settings.RAY_ADDRESS,
        "LEAN_SERVER_URL": django_settings.LEAN_SERVER_URL,
        "ARTIFACTS_DIR": str(django_settings.ARTIFACTS_DIR),
        "PROMPTSET_IMPORT_ROOTS": os.pathsep.join(str(root) for root in django_settings.PROMPTSET_IMPORT_ROOTS),
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
    }


@pytest.fixture(scope="session")
def platform_processes(django_db_setup, django_db_blocker, ray_head, lean_standin):
    """The platform's own processes against the test database: ASGI web server, Celery worker, ingester,
    sweeper (looking every 2 s, and acting sooner than in production: tests/faults waits on it).

    Tests using them need ``transactional_db`` so that what they write is committed and
    visible to these processes.
    """
    import sys

    from deploy.services import PlatformProcess

    with django_db_blocker.unblock():
        env = _platform_env()
    logs = _root / "logs"
    python = sys.executable
    web_port = free_port()
    processes = [
        PlatformProcess(name="web", port=web_port, log_dir=logs, env=env,
                        argv=[python, "-m", "uvicorn", "config.asgi:application", "--app-dir", "platform",
                              "--host", "127.0.0.1", "--port", str(web_port), "--ws", "websockets"]),
        PlatformProcess(name="celery-worker", port=0, log_dir=logs, env=env, has_port=False,
                        argv=[python, "-m", "celery", "--workdir", "platform", "-A", "config", "worker",
                              "--loglevel", "INFO", "--concurrency", "1", "--pool", "solo", "--without-gossip",
                              "--without-mingle"]),
        PlatformProcess(name="ingester", port=0, log_dir=logs, env=env, has_port=False,
                        argv=[python, "manage.py", "ingest_events"]),
        PlatformProcess(name="progress-forwarder", port=0, log_dir=logs, env=env, has_port=False,
                        argv=[python, "manage.py", "forward_progress"]),
        PlatformProcess(name="sweeper", port=0, log_dir=logs, has_port=False,
                        env={**env, "SWEEP_EVERY_S": "2", "SWEEP_QUEUED_AFTER_S": "15", "SWEEP_STARTING_AFTER_S": "45",
                             "SWEEP_ENDED_JOB_GRACE_S": "5"},
                        argv=[python, "manage.py", "sweep_runs"]),
    ]
    started = []
    try:
        for process in processes:
            process.start()
            started.append(process)
        yield {process.name: process for process in processes} | {"url": f"http://127.0.0.1:{web_port}"}
    finally:
        for process in reversed(started):
            process.stop()


@pytest.fixture
def platform_logs():
    """Every platform log of this session, for failure messages."""

    def read() -> str:
        parts = []
        for path in sorted((_root / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text(errors="replace").splitlines()[-40:]))
        return "\n".join(parts)

    return read


def pytest_collection_modifyitems(config, items):
    """Tests that start the platform's processes next to last: once started, the session's ingester,
    sweeper and worker keep acting on every run in the test database, and would race the tests that
    drive an ingester or a sweeper by hand. Browser tests last: Playwright's sync API leaves its
    event loop marked as running in the main thread, and any later test that calls async_to_sync
    would then refuse to run."""
    items.sort(key=lambda item: (item.get_closest_marker("browser") is not None,
                                 "platform_processes" in getattr(item, "fixturenames", ())))
