"""The platform submits every run as ``python -m trainer run`` (or ``sft``, ``evaluate``) with no launcher in front:
a run of several learner ranks or with a rollout pool is the driver (trainer/loop/ray_driver.py), which holds no GPU
and reserves the run's GPUs and CPUs as its placement group, on whichever nodes Ray grants them. A one-process run
(SFT, an evaluation, one GPU and no pool) still holds its resources in the job's own process."""

from __future__ import annotations

import shlex

import pytest

from tests.submitted_jobs import submitted_body
from trainer.config import RunConfig


def run_of(kind: str, overrides: dict | None = None, attempt: int = 1):
    from runs.models import Run

    config = RunConfig.from_preset("h100x8", overrides or {}).to_json_dict()
    return Run(pk=7, kind=kind, attempt=attempt, config=config, name="r")  # unsaved: the entry point reads nothing stored


def test_an_eight_gpu_rl_run_is_the_trainers_own_command_with_no_torchrun():
    from runs.ray_jobs import trainer_entrypoint

    argv = shlex.split(trainer_entrypoint(run_of("rl", attempt=2)))
    assert argv[1:4] == ["-m", "trainer", "run"] and argv[-1] == "--resume"
    assert not any("torch" in arg for arg in argv)


@pytest.mark.parametrize("layout", [{}, {"rollout": {"max_staleness": 1}, "cluster": {"rollout_gpus": 2}}],
                         ids=["synchronous", "asynchronous_with_a_pool"])
def test_the_driver_of_a_run_of_several_ranks_asks_ray_for_no_gpu_and_no_cpu(layout, monkeypatch):
    body = submitted_body(run_of("rl", layout), monkeypatch)
    assert "entrypoint_num_gpus" not in body and "entrypoint_num_cpus" not in body, body
    assert shlex.split(body["entrypoint"])[1:4] == ["-m", "trainer", "run"]


@pytest.mark.parametrize("kind", ["sft", "eval"])
def test_a_one_process_run_still_holds_its_gpu_and_cpus_itself(kind, monkeypatch):
    body = submitted_body(run_of(kind), monkeypatch)
    assert (body["entrypoint_num_gpus"], body["entrypoint_num_cpus"]) == (1.0, 8.0)


def test_a_one_gpu_rl_run_without_a_pool_is_one_process_holding_its_gpu(monkeypatch):
    body = submitted_body(run_of("rl", {"cluster": {"num_gpus": 1}, "rollout": {"vllm_tensor_parallel_size": 1}}),
                          monkeypatch)
    assert body["entrypoint_num_gpus"] == 1.0
