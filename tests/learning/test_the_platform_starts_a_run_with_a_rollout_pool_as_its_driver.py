"""An asynchronous GPU run with a rollout pool is submitted as its driver (trainer/loop/ray_driver.py), with no
torchrun: the driver places one learner-rank actor per learner GPU and one engine actor per rollout engine, each
in its bundle of the run's placement group, seeing only the GPUs Ray gave it (the bundles: the placement rule,
tests/placement/test_one_placement_rule_packs_a_run_into_bundles_that_fit_across_nodes.py)."""

from __future__ import annotations

import shlex

from trainer.config import RunConfig


def h100x8(rollout_gpus: int, num_gpus: int = 8) -> RunConfig:
    return RunConfig.from_preset("h100x8", {
        "rollout": {"max_staleness": 1}, "cluster": {"num_gpus": num_gpus, "rollout_gpus": rollout_gpus}})


def test_the_platform_starts_a_run_with_a_pool_as_its_driver_with_no_torchrun():
    from runs.models import Run
    from runs.ray_jobs import trainer_entrypoint

    def argv_of(rollout_gpus: int, num_gpus: int = 8):
        config = h100x8(rollout_gpus, num_gpus=num_gpus).to_json_dict()
        return shlex.split(trainer_entrypoint(Run(pk=7, kind="rl", attempt=1, config=config)))

    assert argv_of(2)[1:4] == ["-m", "trainer", "run"]  # the driver places the learner ranks (trainer/loop/ray_driver.py)
    assert argv_of(1, num_gpus=2)[1:4] == ["-m", "trainer", "run"]
