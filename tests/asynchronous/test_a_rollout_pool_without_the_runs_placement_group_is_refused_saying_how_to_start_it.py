"""A rollout pool's engines are placed in the run's placement group, and nowhere else.

Learner rank 0 starts them in the group the driver reserved and named (TRAINER_PLACEMENT_GROUP): placed anywhere
else, they would take GPUs the run never reserved, or wait forever for GPUs the run's own job holds. A rank that was
not told the group's name refuses the pool at start-up, saying how to start the run; told a name that does not
exist, it says which name and namespace it looked in.
"""

from __future__ import annotations

import pytest

from trainer.asynchronous.engine_actors import PLACEMENT_GROUP_VARIABLE, run_placement_group


def test_a_rank_not_told_its_placement_group_refuses_the_pool_saying_how_to_start_the_run():
    with pytest.raises(ValueError) as refused:
        run_placement_group({})
    message = str(refused.value)
    assert f"{PLACEMENT_GROUP_VARIABLE} is not set" in message
    assert "python -m trainer run" in message and "cluster.rollout_gpus=0" in message


def test_a_placement_group_name_that_does_not_exist_is_named_in_the_refusal():
    from tests.asynchronous.ray_nodes import node_arguments, ray_cluster

    with ray_cluster(node_arguments(num_cpus=1, num_gpus=0), []), pytest.raises(ValueError) as refused:
        run_placement_group({PLACEMENT_GROUP_VARIABLE: "run-7-attempt-1"})
    assert "TRAINER_PLACEMENT_GROUP is 'run-7-attempt-1'" in str(refused.value)
    assert "namespace 'leanrl'" in str(refused.value)
