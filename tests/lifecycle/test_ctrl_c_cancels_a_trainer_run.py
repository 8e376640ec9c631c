"""Ctrl-C in ``python -m trainer run`` ends the run as cancelled, like Ray's SIGTERM: no failure, no traceback."""

from __future__ import annotations

import signal

import pytest

from tests.lifecycle.trainer_process import events_until_it_ends, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread


@pytest.mark.parametrize("signal_to_send, named", [(signal.SIGINT, "SIGINT (Ctrl-C)"), (signal.SIGTERM, "SIGTERM")])
def test_a_signal_during_training_ends_the_run_cancelled_with_the_signal_named(tmp_path, signal_to_send, named):
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, "--attempt", "3")
        events = events_until_it_ends(trainer, lambda: trainer.send_signal(signal_to_send))
        exit_code = trainer.returncode
        stderr = trainer.stderr.read()
    finished = [e for e in events if e["type"] == "run_finished"]
    assert len(finished) == 1, f"events: {[e['type'] for e in events]}\nstderr: {stderr[-3000:]}"
    assert finished[0]["payload"]["status"] == "cancelled", f"{finished[0]['payload']}\n{stderr[-3000:]}"
    assert finished[0]["payload"]["reason"].startswith(f"stopped by {named} during step")
    assert not [e for e in events if e["type"] == "error"]
    assert "KeyboardInterrupt" not in stderr and "Traceback" not in stderr
    assert exit_code == 143, stderr[-3000:]
    assert {e["attempt"] for e in events} == {3}
