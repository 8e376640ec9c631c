"""A run that asks for GPUs on a node whose PyTorch cannot use CUDA fails before it starts, and says why.

This machine's PyTorch is the CPU build, so it is such a node. Before, the learner, SFT and
torch.distributed fell back to the CPU and gloo: a run paid for on GPUs crawled on the host.
"""

from __future__ import annotations

import json

import pytest

from trainer.__main__ import main as trainer_main
from trainer.ranks import CPU_STANDS_IN_FOR_GPUS, MINIMUM_NVIDIA_DRIVER, check_cuda_for_gpus

PROBLEM = {"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}
TINY = ["--preset", "cpu-demo", "--set", "model.source=tiny_random", "--set", "cluster.num_gpus=1"]


@pytest.fixture
def a_node_without_cuda(monkeypatch):
    """Here, without the tests' word that CPU processes stand in for the GPUs."""
    import torch

    assert not torch.cuda.is_available()
    monkeypatch.delenv(CPU_STANDS_IN_FOR_GPUS, raising=False)


@pytest.fixture
def promptset(tmp_path):
    path = tmp_path / "problems.jsonl"
    path.write_text(json.dumps(PROBLEM) + "\n")
    return path


def finished_reason(stdout: str) -> str:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    assert events[-1]["type"] == "run_finished" and events[-1]["payload"]["status"] == "failed"
    return events[-1]["payload"]["reason"]


def assert_names_the_cause(reason: str) -> None:
    assert "cluster.num_gpus is 1 but this node has no working CUDA" in reason
    assert "CPU-only build" in reason  # the cause on this machine
    assert f"NVIDIA driver {MINIMUM_NVIDIA_DRIVER} or newer" in reason and "cluster.num_gpus=0" in reason


def test_an_rl_run_with_one_gpu_fails_at_start_naming_the_cause(a_node_without_cuda, promptset, tmp_path, capsys):
    code = trainer_main(["run", *TINY, "--promptset", str(promptset), "--output", str(tmp_path / "run")])
    assert code != 0
    assert_names_the_cause(finished_reason(capsys.readouterr().out))
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_an_sft_run_with_one_gpu_fails_at_start_naming_the_cause(a_node_without_cuda, promptset, tmp_path, capsys):
    code = trainer_main(["sft", *TINY, "--promptset", str(promptset), "--output", str(tmp_path / "sft"),
                         "--events", "stdout"])
    assert code != 0
    assert_names_the_cause(finished_reason(capsys.readouterr().out))


def test_an_evaluation_run_with_one_gpu_fails_at_start_naming_the_cause(a_node_without_cuda, promptset, tmp_path,
                                                                         capsys):
    code = trainer_main(["evaluate", *TINY, "--promptset", str(promptset), "--output", str(tmp_path / "eval")])
    assert code != 0
    assert_names_the_cause(finished_reason(capsys.readouterr().out))


def test_a_cpu_run_and_a_named_cpu_stand_in_for_gpus_still_start(a_node_without_cuda):
    check_cuda_for_gpus(0)
    check_cuda_for_gpus(8, environ={CPU_STANDS_IN_FOR_GPUS: "1"})
