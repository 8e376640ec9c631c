"""Where an asynchronous GPU run's rollout pool sits (trainer/ranks.py ``rollout_pool_devices``, and the platform's
command): the driver places one learner-rank actor per learner GPU (trainer/loop/ray_driver.py), and learner rank 0
starts one generator process per rollout engine, each seeing only the pool's GPUs it holds, read through the GPUs
its launcher was granted."""

from __future__ import annotations

import shlex

import pytest

from trainer.config import RunConfig
from trainer.ranks import rollout_pool_devices


def h100x8(rollout_gpus: int, engine: str = "vllm", tensor_parallel: int = 1, num_gpus: int = 8) -> RunConfig:
    return RunConfig.from_preset("h100x8", {
        "rollout": {"max_staleness": 1, "engine": engine, "vllm_tensor_parallel_size": tensor_parallel},
        "cluster": {"num_gpus": num_gpus, "rollout_gpus": rollout_gpus}})


def test_eight_gpus_with_a_pool_of_two_give_one_vllm_engine_of_tensor_parallel_two_the_last_two():
    assert rollout_pool_devices(h100x8(2, tensor_parallel=2)) == ["6,7"]


def test_engines_of_tensor_parallel_one_each_get_one_gpu_of_the_pool():
    assert rollout_pool_devices(h100x8(2)) == ["6", "7"]
    assert rollout_pool_devices(h100x8(4, tensor_parallel=2)) == ["4,5", "6,7"]
    assert rollout_pool_devices(h100x8(2, engine="transformers", tensor_parallel=2)) == ["6", "7"]  # never sharded


def test_the_pool_is_read_through_the_gpus_the_launcher_granted():
    # Ray grants a job GPUs by setting CUDA_VISIBLE_DEVICES; the learner's cuda:0–5 are the first six of them.
    assert rollout_pool_devices(h100x8(2, tensor_parallel=2), "8,9,10,11,12,13,14,15") == ["14,15"]
    assert rollout_pool_devices(h100x8(1, num_gpus=2), "3, 5") == ["5"]


def test_no_pool_means_no_generator_placement():
    assert rollout_pool_devices(RunConfig.from_preset("h100x8")) == []
    assert rollout_pool_devices(RunConfig.from_preset("cpu-smoke", {"rollout": {"max_staleness": 1}})) == []


def test_fewer_visible_gpus_than_the_run_asks_for_is_refused_saying_which():
    expected = r"cluster.num_gpus is 8 but only 4 GPU\(s\) are visible \(CUDA_VISIBLE_DEVICES='0,1,2,3'\)"
    with pytest.raises(ValueError, match=expected):
        rollout_pool_devices(h100x8(2), "0,1,2,3")


def test_the_platform_starts_a_run_with_a_pool_as_its_driver_with_no_torchrun():
    from runs.models import Run
    from runs.ray_jobs import trainer_entrypoint

    def argv_of(rollout_gpus: int, num_gpus: int = 8):
        config = h100x8(rollout_gpus, num_gpus=num_gpus).to_json_dict()
        return shlex.split(trainer_entrypoint(Run(pk=7, kind="rl", attempt=1, config=config)))

    assert argv_of(2)[1:4] == ["-m", "trainer", "run"]  # the driver places the learner ranks (trainer/loop/ray_driver.py)
    assert argv_of(1, num_gpus=2)[1:4] == ["-m", "trainer", "run"]
