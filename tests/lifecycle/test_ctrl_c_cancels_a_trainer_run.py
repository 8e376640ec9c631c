"""Ctrl-C in ``python -m trainer run`` ends the run as cancelled, like Ray's SIGTERM: no failure, no traceback."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from deploy.services import REPO_DIR
from trainer.verification.standin_server import StandinServerThread


def start_trainer(tmp_path, lean_url, signal_to_send):
    promptset = tmp_path / "problems.jsonl"
    promptset.write_text("".join(
        json.dumps({"problem_id": f"p{i}", "formal_statement": f"theorem p{i} : ({i} : ℕ) + 1 = {i + 1} := by"}) + "\n"
        for i in range(3)
    ))
    argv = [sys.executable, "-m", "trainer", "run", "--preset", "cpu-smoke", "--promptset", str(promptset),
            "--output", str(tmp_path / "out"), "--lean-url", lean_url, "--attempt", "3",
            "--set", "schedule.total_steps=1000"]
    # start_new_session: the signal reaches only the trainer, as a terminal's Ctrl-C reaches its foreground job.
    return subprocess.Popen(argv, cwd=REPO_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


@pytest.mark.parametrize("signal_to_send, named", [(signal.SIGINT, "SIGINT (Ctrl-C)"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_during_training_ends_the_run_cancelled_with_the_signal_named(tmp_path, signal_to_send, named):
    with StandinServerThread() as server:
        trainer = start_trainer(tmp_path, server.url, signal_to_send)
        events = []
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                line = trainer.stdout.readline()
                if not line:
                    break
                events.append(json.loads(line))
                if events[-1]["type"] == "step_started" and events[-1]["payload"]["step"] == 2:
                    trainer.send_signal(signal_to_send)
            exit_code = trainer.wait(120)
        finally:
            if trainer.poll() is None:
                trainer.kill()
        stderr = trainer.stderr.read()
    finished = [e for e in events if e["type"] == "run_finished"]
    assert len(finished) == 1, f"events: {[e['type'] for e in events]}\nstderr: {stderr[-3000:]}"
    assert finished[0]["payload"]["status"] == "cancelled", f"{finished[0]['payload']}\n{stderr[-3000:]}"
    assert finished[0]["payload"]["reason"].startswith(f"stopped by {named} during step")
    assert not [e for e in events if e["type"] == "error"]
    assert "KeyboardInterrupt" not in stderr and "Traceback" not in stderr
    assert exit_code == 143, stderr[-3000:]
    assert {e["attempt"] for e in events} == {3}
