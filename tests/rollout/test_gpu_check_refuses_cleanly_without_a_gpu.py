"""deploy/gpu_check.py on a machine without a GPU: it explains itself and refuses, it never half-runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "gpu_check.py"


def run_script(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=120)


def test_its_help_names_the_options_a_person_needs():
    result = run_script("--help")
    assert result.returncode == 0
    for option in ("--output", "--response-tokens", "--prompt-tokens", "--samples", "--generate-tokens"):
        assert option in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the refusal cannot be seen here")
def test_without_a_gpu_it_exits_non_zero_and_says_what_is_missing(tmp_path):
    result = run_script("--output", str(tmp_path / "figures.json"))
    assert result.returncode == 2
    assert "no CUDA GPU is visible" in result.stderr
    assert "run this on a GPU node" in result.stderr
    assert not (tmp_path / "figures.json").exists()  # no figures pretend a check ran
