"""Ray nodes on this one machine for the rollout pool's tests, and the run's placement group on them.

Each node declares logical GPUs (``num_gpus``: Ray schedules by declared resources) and CPU processes stand in for
them (trainer/ranks.py ``CPU_STANDS_IN_FOR_GPUS``), as the suite's other GPU-layout tests do. A test that runs the
trainer's command gives it the cluster's ``address`` as RAY_ADDRESS, and the run's driver reserves the placement group
itself: such a test reserves none, which would hold the resources the driver waits for. Only a test that starts the
pool or the learner ranks without the driver (it injects what the command cannot be given: a test scorer, a tiny
random model) reserves ``run_placement(config)`` here (``reserved_placement_group``), as the driver would, and hands
its name to what it starts through ``TRAINER_PLACEMENT_GROUP``.
"""

from __future__ import annotations

import os
import uuid
from contextlib import contextmanager

from trainer.asynchronous.engine_actors import RUN_NAMESPACE
from trainer.cluster.placement import run_placement

# Small: a node's object store holds nothing of a run's (weights travel over the weight group, answers are small).
OBJECT_STORE_BYTES = 80 * 1024 * 1024


def node_arguments(num_cpus: int, num_gpus: int, **more) -> dict:
    return {"num_cpus": num_cpus, "num_gpus": num_gpus, "object_store_memory": OBJECT_STORE_BYTES, **more}


@contextmanager
def ray_cluster(head: dict, workers: list[dict]):
    """A Ray cluster of a head and ``workers`` on this machine, this process connected to it in the run's namespace
    (``node_arguments``); yields the Cluster (its ``address``, ``add_node``, ``remove_node``)."""
    import ray
    from ray.cluster_utils import Cluster

    temp_dir = os.environ.get("LEANRL_TEST_RAY_TEMP", "/tmp/ray-tests") + "-nodes"
    # No dashboard: it would bind port 8265 of a machine several test sessions share.
    cluster = Cluster(initialize_head=True, head_node_args={"temp_dir": temp_dir, "include_dashboard": False, **head})
    try:
        for worker in workers:
            cluster.add_node(**worker)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace=RUN_NAMESPACE, configure_logging=False, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@contextmanager
def reserved_placement_group(config, timeout_s: float = 120.0):
    """The run's placement group, as the driver reserves it, for a test without the driver (see the module's
    docstring); yields its name (``TRAINER_PLACEMENT_GROUP``)."""
    import ray
    from ray.util import placement_group, remove_placement_group

    placement = run_placement(config)
    name = f"test-run-{uuid.uuid4().hex[:8]}"
    group = placement_group(placement.as_ray(), strategy=placement.strategy, name=name)
    try:
        ray.get(group.ready(), timeout=timeout_s)
        yield name
    finally:
        remove_placement_group(group)
