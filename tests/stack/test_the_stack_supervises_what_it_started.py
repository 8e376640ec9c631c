"""`make run`'s stack keeps itself up: a crashed process is started again and the restart is logged,
Redis keeps its data across it, and Ctrl-C stops everything even when the stack was started as a
shell's background job (which begins with Ctrl-C ignored)."""

import signal
import subprocess
import sys
import time

import psutil
import pytest
import redis

from deploy.services import REPO_DIR
from tests.stack.test_one_command_stack import ports  # noqa: F401 - a fixture

pytestmark = pytest.mark.integration


def start_stack_with_ctrl_c_ignored(data_dir, ports):
    argv = [sys.executable, "-m", "deploy.stack", "--data-dir", str(data_dir),
            "--web-port", str(ports["web"]), "--postgres-port", str(ports["postgres"]),
            "--redis-port", str(ports["redis"]), "--ray-port", str(ports["ray"]),
            "--ray-dashboard-port", str(ports["dashboard"]), "--lean-port", str(ports["lean"]), "--ray-cpus", "1",
            "--no-warm-start"]
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))


def read_until_all(process, needles, timeout=240):
    lines, missing, deadline = [], set(needles), time.monotonic() + timeout
    while missing and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        missing = {needle for needle in missing if needle not in line}
    assert not missing, f"never printed {sorted(missing)}:\n{''.join(lines)}"
    return "".join(lines)


def child_running(stack, *words):
    for child in psutil.Process(stack.pid).children(recursive=True):
        try:
            cmdline = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if all(word in cmdline for word in words):
            return child
    raise AssertionError(f"no child of the stack runs {words}")


def test_crashed_processes_are_started_again_redis_keeps_its_data_and_ctrl_c_still_stops_it(data_dir, ports):
    stack = start_stack_with_ctrl_c_ignored(data_dir, ports)
    try:
        read_until_all(stack, ["Press Ctrl-C"])
        redis.Redis(port=ports["redis"]).set("kept-across-a-crash", "yes")
        for words in (("manage.py", "ingest_events"), ("manage.py", "sweep_runs"), ("redis-server",),
                      ("uvicorn", "config.asgi:application")):
            child_running(stack, *words).kill()
        output = read_until_all(stack, [f"== {name} started again" for name in ("ingester", "sweeper", "redis", "web")])
        assert "== ingester exited (code -9); starting it again in" in output
        assert redis.Redis(port=ports["redis"]).get("kept-across-a-crash") == b"yes"
        child_running(stack, "manage.py", "ingest_events")

        children = psutil.Process(stack.pid).children(recursive=True)
        stack.send_signal(signal.SIGINT)
        assert stack.wait(180) == 0
        _, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, f"still running after Ctrl-C: {alive}"
    finally:
        if stack.poll() is None:
            stack.kill()
