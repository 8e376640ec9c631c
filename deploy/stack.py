"""The whole platform on one machine, in one command: ``make run`` (or ``python -m deploy.stack``).

Starts PostgreSQL, Redis, a local Ray head and the stand-in Lean server, migrates, creates the
demo account and promptset, then the web server (HTTP and WebSocket), a Celery worker, the
event ingester and the sweeper. Run again, it reuses the data folder (Redis keeps its data in an
append-only file). It supervises what it started: a process that exits is started again, after
a pause that doubles with each quick crash (1 s up to 30 s), and says so with the last lines of
its log. Ctrl-C or SIGTERM stops everything it started, the databases with a clean shutdown,
whatever signal handling it inherited (a shell's background job starts with Ctrl-C ignored).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from deploy.services import (
    REPO_DIR,
    LeanStandinService,
    PlatformProcess,
    PostgresService,
    RayHeadService,
    RedisService,
    Service,
    ServiceError,
)
from deploy.warm_start import (
    STATUS_FILE,
    is_built,
    is_vllm_cache_filled,
    warm_start_build_dir,
    warm_start_checkpoint_path,
    warm_start_status,
)


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m deploy.stack", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("LEANRL_DATA_DIR", REPO_DIR / "var")),
                        help="Databases, logs, artifacts and checkpoints (env LEANRL_DATA_DIR; default ./var).")
    parser.add_argument("--host", default=os.environ.get("LEANRL_HOST", "127.0.0.1"),
                        help="Address the web server listens on (env LEANRL_HOST).")
    parser.add_argument("--web-port", type=int, default=_env_int("LEANRL_WEB_PORT", 8000))
    parser.add_argument("--postgres-port", type=int, default=_env_int("LEANRL_POSTGRES_PORT", 5433))
    parser.add_argument("--redis-port", type=int, default=_env_int("LEANRL_REDIS_PORT", 6380))
    parser.add_argument("--ray-port", type=int, default=_env_int("LEANRL_RAY_PORT", 6389))
    parser.add_argument("--ray-dashboard-port", type=int, default=_env_int("LEANRL_RAY_DASHBOARD_PORT", 8265))
    parser.add_argument("--lean-port", type=int, default=_env_int("LEANRL_LEAN_PORT", 12332))
    parser.add_argument("--ray-cpus", type=int, default=_env_int("LEANRL_RAY_CPUS", max(os.cpu_count() or 2, 2)))
    parser.add_argument("--ray-object-store-mb", type=int, default=_env_int("LEANRL_RAY_OBJECT_STORE_MB", 512),
                        help="Cap on Ray's object store (by default Ray would claim 30%% of memory).")
    parser.add_argument("--no-warm-start", action="store_true",
                        help="Do not build the cpu-demo warm start (cpu-demo runs then wait for it or use cpu-smoke).")
    parser.add_argument("--debug", action="store_true",
                        help="Django's debug pages: an error or an unknown address shows settings, source and every "
                             "route. Off by default: the stack then serves plain error pages, as production does.")
    parser.add_argument("--demo-username", default="demo")
    parser.add_argument("--demo-password", default="lean-rl-demo")
    return parser.parse_args(argv)


def manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([sys.executable, "manage.py", *args], cwd=REPO_DIR, env=env, check=True)


class Stack:
    def __init__(self, options: argparse.Namespace):
        self.options = options
        data = options.data_dir.resolve()
        logs = data / "logs"
        self.postgres = PostgresService(name="postgres", port=options.postgres_port, log_dir=logs,
                                        data_dir=data / "postgres")
        self.redis = RedisService(name="redis", port=options.redis_port, log_dir=logs, data_dir=data / "redis")
        self.ray = RayHeadService(name="ray", port=options.ray_port, log_dir=logs,
                                  dashboard_port=options.ray_dashboard_port, num_cpus=options.ray_cpus,
                                  object_store_bytes=options.ray_object_store_mb * 1024 * 1024,
                                  temp_dir=Path("/tmp/ray-leanrl"))
        self.lean = LeanStandinService(name="lean-standin", port=options.lean_port, log_dir=logs)
        self.env = {
            **os.environ,
            "DATABASE_URL": self.postgres.url,
            "REDIS_URL": self.redis.url,
            "RAY_ADDRESS": self.ray.address,
            "LEAN_SERVER_URL": self.lean.url,
            "LEAN_SERVER_IS_STANDIN": "1",
            "ARTIFACTS_DIR": str(data / "artifacts"),
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "DJANGO_DEBUG": "1" if options.debug else "0",
        }
        # The compile caches live with the stack's data: kept across restarts, filled for the cpu-demo by the warm
        # start's builder, handed to every run (platform/runs/ray_jobs.py). On CPU vLLM compiles with torch
        # inductor's own cache (vllm/platforms/cpu.py: DYNAMO_TRACE_ONCE); on GPUs inside VLLM_CACHE_ROOT.
        self.env.setdefault("VLLM_CACHE_ROOT", str(data / "compile-cache" / "vllm"))
        self.env.setdefault("TORCHINDUCTOR_CACHE_DIR", str(data / "compile-cache" / "inductor"))
        if not options.no_warm_start:
            # Where the cpu-demo preset's warm-started model appears once built (deploy/warm_start.py).
            self.env["LEANRL_WARM_START_MODEL"] = str(warm_start_checkpoint_path(data))
            self.env["LEANRL_WARM_START_STATUS"] = str(warm_start_build_dir(data) / STATUS_FILE)
        python = sys.executable
        self.web = PlatformProcess(
            name="web", port=options.web_port, log_dir=logs, env=self.env,
            argv=[python, "-m", "uvicorn", "config.asgi:application", "--app-dir", "platform",
                  "--host", options.host, "--port", str(options.web_port), "--ws", "websockets"],
        )
        self.worker = PlatformProcess(
            name="celery-worker", port=0, log_dir=logs, env=self.env, has_port=False,
            argv=[python, "-m", "celery", "--workdir", "platform", "-A", "config", "worker",
                  "--loglevel", "INFO", "--concurrency", "2", "--without-gossip", "--without-mingle"],
        )
        self.ingester = PlatformProcess(
            name="ingester", port=0, log_dir=logs, env=self.env, has_port=False,
            argv=[python, "manage.py", "ingest_events"],
        )
        self.forwarder = PlatformProcess(
            name="progress-forwarder", port=0, log_dir=logs, env=self.env, has_port=False,
            argv=[python, "manage.py", "forward_progress"],
        )
        self.sweeper = PlatformProcess(
            name="sweeper", port=0, log_dir=logs, env=self.env, has_port=False,
            argv=[python, "manage.py", "sweep_runs"],
        )
        self.warm_start = PlatformProcess(
            name="warm-start", port=0, log_dir=logs, env=self.env, has_port=False,
            argv=[python, "-m", "deploy.warm_start", "--data-dir", str(data)],
        )
        self.started: list[Service] = []
        self.supervisor = Supervisor()

    def start(self) -> None:
        for service in (self.postgres, self.redis, self.ray, self.lean):
            self._start(service)
        print("== migrating the database", flush=True)
        manage("migrate", "--no-input", "-v", "0", env=self.env)
        manage("create_demo_account", "--username", self.options.demo_username,
               "--password", self.options.demo_password, env=self.env)
        manage("create_demo_promptset", "--owner", self.options.demo_username, env=self.env)
        manage("create_benchmarks", env=self.env)
        for service in (self.web, self.worker, self.ingester, self.forwarder, self.sweeper):
            self._start(service)
        data = self.options.data_dir.resolve()
        if not self.options.no_warm_start and not is_built(data):
            print("== building the cpu-demo warm start in the background (SmolLM2 fine-tuned on demonstrations, "
                  "then vLLM compiled for it; once, cached in the data folder)", flush=True)
            self.warm_start.start()
        elif not self.options.no_warm_start and not is_vllm_cache_filled(data, self.env):
            print("== compiling vLLM for the cpu-demo warm start in the background (once, cached in "
                  f"{data / 'compile-cache'})", flush=True)
            self.warm_start.start()

    def _start(self, service: Service) -> None:
        print(f"== starting {service.name}" + (f" on port {service.port}" if service.port else ""), flush=True)
        service.start()
        self.started.append(service)

    def stop(self) -> None:
        if self.warm_start.is_running():
            print("== stopping the warm-start build (it resumes from its last checkpoint next time)", flush=True)
            self.warm_start.stop()
        for service in reversed(self.started):
            print(f"== stopping {service.name}", flush=True)
            service.stop()
        self.started.clear()

    def watch(self, should_stop=lambda: False) -> None:
        data = self.options.data_dir.resolve()
        reported = None
        while not should_stop():
            for service in self.started:
                self.supervisor.check(service)
            if self.warm_start.process is not None and reported != "done":
                reported = self._report_warm_start(data, reported)
            time.sleep(0.5)

    def _report_warm_start(self, data: Path, reported):
        """A one-line progress bar for the background warm start, then one line when it ends."""
        status = warm_start_status(data)
        if status["state"] == "ready":
            print(f"\n== warm start ready: cpu-demo runs start from {status['path']}", flush=True)
            return "done"
        if not self.warm_start.is_running():
            print(f"\n== the warm start failed (cpu-demo runs start from the base model); see "
                  f"{self.warm_start.log_dir / 'warm-start.log'}", flush=True)
            return "done"
        step, total = status.get("step") or 0, status.get("total_steps") or 0
        if total and (step, total) != reported:
            filled = int(30 * step / total)
            print(f"\r   warm start [{'#' * filled}{'.' * (30 - filled)}] step {step}/{total}", end="", flush=True)
            return (step, total)
        return reported


class Supervisor:
    """Starts again a service that exited, after a pause that doubles with each crash in a row (a
    service that stayed up for ``stable_s`` starts again from the shortest pause); logs each."""

    def __init__(self, *, first_pause_s: float = 1.0, longest_pause_s: float = 30.0, stable_s: float = 60.0,
                 clock=time.monotonic):
        self.first_pause_s, self.longest_pause_s, self.stable_s = first_pause_s, longest_pause_s, stable_s
        self.clock = clock
        self.restarts: dict[str, int] = {}
        self._crashes_in_a_row: dict[str, int] = {}
        self._up_since: dict[str, float] = {}
        self._restart_at: dict[str, float] = {}

    def check(self, service: Service) -> None:
        name, now = service.name, self.clock()
        if service.is_running():
            self._up_since.setdefault(name, now)
            if now - self._up_since[name] >= self.stable_s:
                self._crashes_in_a_row[name] = 0
            return
        if name not in self._restart_at:
            self._up_since.pop(name, None)
            crashes = self._crashes_in_a_row.get(name, 0)
            pause = min(self.first_pause_s * 2 ** crashes, self.longest_pause_s)
            self._crashes_in_a_row[name] = crashes + 1
            self._restart_at[name] = now + pause
            code = service.process.returncode if service.process is not None else None
            _say(f"== {name} exited (code {code}); starting it again in {pause:.0f} s. Last lines of its log:\n"
                 + _indent(service.log_tail(12)))
        if now < self._restart_at[name]:
            return
        del self._restart_at[name]
        try:
            service.stop()  # what a crashed service left behind (a Ray head's other processes) goes first
            service.start()
        except (ServiceError, OSError, subprocess.CalledProcessError) as error:
            _say(f"== {name} did not start again: {error}")
            return  # still not running: the next check schedules the next try, with a longer pause
        self.restarts[name] = self.restarts.get(name, 0) + 1
        _say(f"== {name} started again (restart {self.restarts[name]})")


def _say(message: str) -> None:
    print(message, flush=True)
    logging.getLogger("deploy.stack").info(message)


def _indent(text: str) -> str:
    return "\n".join(f"   | {line}" for line in text.splitlines())


def stop_on_signals() -> None:
    """SIGINT and SIGTERM stop the stack, whatever this process inherited: a shell starts a
    background job with SIGINT ignored, and an ignored signal would leave the stack unstoppable."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)


def ignore_signals_while_stopping() -> None:
    # A second Ctrl-C must not cut the orderly shutdown short and leave databases running.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def main(argv=None) -> int:
    options = parse_args(argv)
    stack = Stack(options)
    stop_on_signals()
    try:
        stack.start()
        host = "localhost" if options.host in ("127.0.0.1", "0.0.0.0") else options.host
        print(
            f"\nThe platform is up: http://{host}:{options.web_port}/\n"
            f"  log in as {options.demo_username!r} with password {options.demo_password!r}\n"
            f"  Lean verdicts come from the stand-in server (no Lean toolchain here)\n"
            f"  logs: {options.data_dir.resolve() / 'logs'}\n"
            f"Press Ctrl-C to stop everything.\n",
            flush=True,
        )
        stack.watch()
    except KeyboardInterrupt:
        print("\n== Ctrl-C: stopping every process this command started", flush=True)
        return 0
    except (ServiceError, subprocess.CalledProcessError) as error:
        print(f"\nstack: {error}", file=sys.stderr, flush=True)
        return 1
    finally:
        ignore_signals_while_stopping()
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
