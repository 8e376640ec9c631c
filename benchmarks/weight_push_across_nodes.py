"""Issue 46: the weight push to a rollout engine on another node, against the same push inside one node.

One invocation, one Ray cluster of this machine (``ray.cluster_utils.Cluster``: a head and one more node). The
policy of cpu-demo (its model, its push dtype: ``packed_weights`` as learner rank 0 packs it) is broadcast from
this process, on the head node, to an engine actor over the pool's weight group (gloo, 64 MiB buckets:
trainer/asynchronous/weight_broadcast.py, the run's own code): first to an actor on the head node (inside one
node), then to an actor on the other node (between two nodes). Each push is timed from the first bucket sent to
the last received, ``--pushes`` times each; reported: the median seconds and GB/s of each, and their ratio.

    .venv/bin/python benchmarks/weight_push_across_nodes.py [--pushes 5]

A toy's measurement: both "nodes" are processes of this one machine, so the push between them crosses the
loopback interface, not a network; the ratio says what the Ray placement and a second raylet cost, not what a
datacenter link costs. A run's cross-node push on real nodes is the size of the push over the link's bandwidth
(docs/operations/index.md says what crosses the network).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


class Receiver:
    """An engine's side of the weight group, without the engine: joins, then receives pushes on demand."""

    def join(self, address, rank: int) -> str:
        import ray

        from trainer.asynchronous.weight_broadcast import WeightGroup

        self.group = WeightGroup.join(address, rank, ray.util.get_node_ip_address())
        return ray.get_runtime_context().get_node_id()

    def receive(self, layouts) -> float:
        self.group.receive(layouts)
        return time.time()


def timed_pushes(node_id: str, packed, pushes: int) -> list[float]:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from trainer.asynchronous.weight_broadcast import WeightGroup, layouts_of

    receiver = ray.remote(Receiver).options(
        num_cpus=1, max_concurrency=2,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
    store, address = WeightGroup.open_store(ray.util.get_node_ip_address(), 1, "gloo")
    joined = receiver.join.remote(address, 1)
    group = WeightGroup.host(store, address)
    assert ray.get(joined) == node_id
    layouts = layouts_of(packed)
    seconds = []
    for _ in range(pushes):
        received = receiver.receive.remote(layouts)
        started = time.time()
        group.send(packed)
        seconds.append(ray.get(received) - started)
    ray.kill(receiver)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pushes", type=int, default=5)
    arguments = parser.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from trainer.asynchronous.generator_process import packed_weights, push_dtype
    from trainer.asynchronous.weight_broadcast import WEIGHT_BUCKET_BYTES, buckets_of, push_bytes
    from trainer.config import RunConfig
    from trainer.learning.models import load_policy

    config = RunConfig.from_preset("cpu-demo")
    model, _ = load_policy(config.model, seed=0)
    packed = packed_weights(model.state_dict(), push_dtype(config))
    del model

    temp_dir = os.environ.get("LEANRL_BENCHMARK_RAY_TEMP", "/tmp/ray-weight-push")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False,
                                                            "temp_dir": temp_dir,
                                                            "object_store_memory": 80 * 1024 * 1024})
    try:
        other = cluster.add_node(num_cpus=2, object_store_memory=80 * 1024 * 1024)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, configure_logging=False, log_to_driver=False)
        head_id = ray.get_runtime_context().get_node_id()
        inside = timed_pushes(head_id, packed, arguments.pushes)
        across = timed_pushes(other.node_id, packed, arguments.pushes)
    finally:
        ray.shutdown()
        cluster.shutdown()

    size = push_bytes(packed)
    inside_s, across_s = statistics.median(inside), statistics.median(across)
    print(f"policy: {config.model.source} of cpu-demo, one push {size / 1e6:.1f} MB in {buckets_of(packed)} bucket(s) "
          f"of at most {WEIGHT_BUCKET_BYTES // (1024 * 1024)} MiB, gloo; {arguments.pushes} pushes each (toy: both "
          "nodes on this machine, loopback)")
    print(f"inside one node:   median {inside_s:.3f} s ({size / inside_s / 1e9:.2f} GB/s); all {inside}")
    print(f"between two nodes: median {across_s:.3f} s ({size / across_s / 1e9:.2f} GB/s); all {across}")
    print(f"ratio, between / inside: {across_s / inside_s:.2f}; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
