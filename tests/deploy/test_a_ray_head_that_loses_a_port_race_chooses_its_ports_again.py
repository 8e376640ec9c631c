"""The local Ray head (the stack's and the suite's) chooses its client, agent and metrics ports free when it is
made; another process may bind one before Ray's agents do. A fresh-machine run saw it: the dashboard agent found
its metrics port taken, the raylet exited with it, and every test on that worker failed "did not report a live
node within 90 s". Such a start now chooses those ports again."""

import shutil
import socket
import tempfile
from pathlib import Path

from deploy.services import RayHeadService, free_port


def test_a_head_whose_metrics_port_was_taken_meanwhile_starts_on_another(tmp_path):
    temp_dir = Path(tempfile.mkdtemp(prefix="ray-race-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    head = None
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
            taken.bind(("0.0.0.0", 0))
            taken.listen()
            taken_port = taken.getsockname()[1]
            head = RayHeadService(name="ray", port=free_port(), log_dir=tmp_path / "logs", dashboard_port=free_port(),
                                  temp_dir=temp_dir, metrics_export_port=taken_port, num_cpus=1)
            head.start()
            assert head.is_running()
            assert head.metrics_export_port != taken_port
        first, _second = sorted(temp_dir.glob("session_2*"))
        assert "Address already in use" in (first / "logs" / "dashboard_agent.log").read_text()
    finally:
        if head is not None:
            head.stop()
        shutil.rmtree(temp_dir, ignore_errors=True)
