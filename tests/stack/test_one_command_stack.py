"""`make run`'s stack as a person uses it: it comes up, says where, stops cleanly on Ctrl-C, and keeps its data."""

import signal
import socket
import subprocess
import sys
import time
import urllib.request

import psutil
import pytest

from deploy.services import REPO_DIR, free_port

pytestmark = pytest.mark.integration


def start_stack(data_dir, ports):
    argv = [sys.executable, "-m", "deploy.stack", "--data-dir", str(data_dir),
            "--web-port", str(ports["web"]), "--postgres-port", str(ports["postgres"]),
            "--redis-port", str(ports["redis"]), "--ray-port", str(ports["ray"]),
            "--ray-dashboard-port", str(ports["dashboard"]), "--lean-port", str(ports["lean"]), "--ray-cpus", "1",
            "--no-warm-start"]  # building it takes CPU minutes; tests/sft covers it
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until(process, needle, timeout=240):
    lines, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            break
        lines.append(line)
        if needle in line:
            return "".join(lines)
    raise AssertionError(f"never printed {needle!r}:\n{''.join(lines)}")


@pytest.fixture
def ports():
    return {name: free_port() for name in ("web", "postgres", "redis", "ray", "dashboard", "lean")}


def test_it_starts_everything_prints_the_login_and_ctrl_c_stops_every_process_and_keeps_the_data(data_dir, ports):
    stack = start_stack(data_dir, ports)
    try:
        banner = read_until(stack, "Press Ctrl-C")
        assert f"http://localhost:{ports['web']}/" in banner and "'demo'" in banner and "'lean-rl-demo'" in banner
        assert "Created benchmark 'miniF2F-test' (244 problems)" in banner  # shipped, from the committed files
        children = psutil.Process(stack.pid).children(recursive=True)
        assert len(children) >= 7  # postgres, redis, ray, the stand-in, web, worker, ingester
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['web']}/healthz", timeout=10) as response:
            assert response.status == 200
        stack.send_signal(signal.SIGINT)
        output = read_until(stack, "stopping postgres", timeout=120)
        assert stack.wait(60) == 0, output
        gone, alive = psutil.wait_procs(children, timeout=30)
        assert not alive, f"still running after Ctrl-C: {[p.info if hasattr(p, 'info') else p for p in alive]}"
    finally:
        if stack.poll() is None:
            stack.kill()

    # Run again: the same data folder, nothing created twice.
    again = start_stack(data_dir, ports)
    try:
        banner = read_until(again, "Press Ctrl-C")
        assert "kept account 'demo'" in banner
        assert "Already present: benchmark 'miniF2F-test' (244 problems)" in banner
        again.send_signal(signal.SIGINT)
        assert again.wait(120) == 0
    finally:
        if again.poll() is None:
            again.kill()


def test_a_port_already_taken_is_named_in_a_clear_message(data_dir, ports):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", ports["redis"]))
        squatter.listen()
        stack = start_stack(data_dir, ports)
        output, _ = stack.communicate(timeout=120)
    assert stack.returncode == 1
    assert f"port {ports['redis']} for redis is already in use" in output
