"""The ``leanrl`` console script, run as a person would run it, with its own credentials file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LEANRL = Path(sys.executable).parent / "leanrl"  # the console script the project installs
REPO_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture
def leanrl(tmp_path):
    # The console script imports leanrl through the shared editable install; PYTHONPATH puts this
    # checkout's leanrl first, so the code under test is the code of this tree.
    environment = {**os.environ, "LEANRL_CONFIG": str(tmp_path / "credentials.json"),
                   "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_DIR), os.environ.get("PYTHONPATH")]))}
    environment.pop("LEANRL_TOKEN", None)
    environment.pop("LEANRL_SERVER", None)

    def run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(LEANRL), *argv], capture_output=True, text=True, timeout=timeout,
                              env=environment, cwd=tmp_path)

    return run
