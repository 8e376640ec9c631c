"""Where a run's processes go on a Ray cluster: the one placement rule.

A run is a driver (the Ray job's entrypoint, holding no GPU) and actors: one per learner rank and, for an
asynchronous run, one per rollout engine. The driver reserves all of them at once as one Ray placement group,
so a run holds either everything it needs or nothing (two half-placed runs never wait on each other).

The rule:

- **A bundle is what must share a node.** A rollout engine's tensor-parallel group shares one node (vLLM's
  shards exchange activations every layer, over NVLink), so its GPUs are one bundle:
  - an asynchronous run (``cluster.rollout_gpus`` > 0): one bundle per learner GPU, then one per rollout
    engine holding its ``rollout.vllm_tensor_parallel_size`` GPUs (one for the transformers engine);
  - a synchronous run: the learner ranks are the engine too (colocated, vLLM sleeping while the learner
    trains), so one bundle per engine group of ``tp`` consecutive ranks, its ranks placed together in it;
  - a CPU run (``cluster.num_gpus`` 0): one bundle, its learner and any generator sharing its cores;
  - an SFT or evaluation run: one bundle of at most one GPU (its trainer is one process).
- **Each bundle has ``cluster.cpus_per_worker`` CPUs per GPU** (that many for a CPU bundle).
- **Strategy PACK**: Ray puts the bundles on as few nodes as it can (the learner's collectives stay inside a
  node when they fit one) and spreads them over more nodes when no node can hold them all.

``placement_problems`` says, from each node's GPUs and CPUs, whether a placement can ever be granted: the
dispatch check refuses at launch what no layout of the cluster fits, with the per-node numbers. Pure rules:
no Ray, no torch, so the platform, the memory plan and the driver read the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from trainer.config import RolloutEngineKind, RunConfig
from trainer.staleness import learner_gpus

STRATEGY = "PACK"
# The driver names the run's placement group to each learner rank in this environment variable; learner rank 0 places
# the rollout engines in that group, and a process given it is one of a driver's ranks, never a driver itself.
PLACEMENT_GROUP_VARIABLE = "TRAINER_PLACEMENT_GROUP"
# Run kinds whose trainer is one process on at most one GPU (the platform's runs.models.RunKind values).
ONE_PROCESS_KINDS = frozenset({"sft", "eval"})


class Role(StrEnum):
    LEARNER = "learner"  # learner ranks (an asynchronous run's, or any run on CPU)
    COLOCATED = "learner and rollout engine"  # a synchronous run's ranks: they train and generate, in turn
    ENGINE = "rollout engine"  # one engine of an asynchronous run's pool


@dataclass(frozen=True)
class Bundle:
    role: Role
    gpus: int
    cpus: int
    ranks: tuple[int, ...] = ()  # the learner ranks placed in this bundle
    engine: int | None = None  # the rollout engine placed in this bundle (an asynchronous run's pool)

    def as_ray(self) -> dict[str, float]:
        """The bundle as ``ray.util.placement_group`` takes it."""
        return {"CPU": float(self.cpus), **({"GPU": float(self.gpus)} if self.gpus else {})}


@dataclass(frozen=True)
class RunPlacement:
    bundles: tuple[Bundle, ...]
    strategy: str = STRATEGY

    @property
    def gpus(self) -> int:
        return sum(bundle.gpus for bundle in self.bundles)

    @property
    def cpus(self) -> int:
        return sum(bundle.cpus for bundle in self.bundles)

    @property
    def learner_ranks(self) -> int:
        return sum(len(bundle.ranks) for bundle in self.bundles)

    @property
    def engines(self) -> int:
        return sum(1 for bundle in self.bundles if bundle.engine is not None)

    @property
    def needs_actors(self) -> bool:
        """Whether the driver places the run as actors: several learner ranks or a rollout pool. A one-process
        run (one learner rank and no pool: a CPU run, SFT, an evaluation) stays in the command's own process,
        holding its one bundle's resources itself (a documented choice: nothing to place apart, no Ray needed)."""
        return self.learner_ranks > 1 or self.engines > 0

    def bundle_of_rank(self, rank: int) -> int:
        return next(index for index, bundle in enumerate(self.bundles) if rank in bundle.ranks)

    def bundle_of_engine(self, engine: int) -> int:
        return next(index for index, bundle in enumerate(self.bundles) if bundle.engine == engine)

    def as_ray(self) -> list[dict[str, float]]:
        return [bundle.as_ray() for bundle in self.bundles]


def run_placement(config: RunConfig, kind: str = "rl") -> RunPlacement:
    """The bundles of a run of ``kind`` with ``config``, in the order the driver reserves them (the rule above)."""
    cluster = config.cluster
    per_gpu_cpus = cluster.cpus_per_worker
    if kind in ONE_PROCESS_KINDS or cluster.num_gpus == 0:
        gpus = min(cluster.num_gpus, 1)
        return RunPlacement((Bundle(Role.LEARNER, gpus, per_gpu_cpus * max(1, gpus), ranks=(0,)),))
    tensor_parallel = (config.rollout.vllm_tensor_parallel_size
                       if config.rollout.engine is RolloutEngineKind.VLLM else 1)
    learners = learner_gpus(config)
    if cluster.rollout_gpus == 0:
        return RunPlacement(tuple(
            Bundle(Role.COLOCATED, len(ranks), per_gpu_cpus * len(ranks), ranks=ranks)
            for ranks in (tuple(range(first, min(first + tensor_parallel, learners)))
                          for first in range(0, learners, tensor_parallel))
        ))
    learner_bundles = [Bundle(Role.LEARNER, 1, per_gpu_cpus, ranks=(rank,)) for rank in range(learners)]
    engine_bundles = [Bundle(Role.ENGINE, tensor_parallel, per_gpu_cpus * tensor_parallel, engine=engine)
                      for engine in range(cluster.rollout_gpus // tensor_parallel)]
    return RunPlacement(tuple(learner_bundles + engine_bundles))


@dataclass(frozen=True)
class NodeCapacity:
    """A node's resources as Ray reports them (``resources_total``); ``name`` is what a message calls it."""

    name: str
    gpus: float
    cpus: float


def _count(value: float) -> str:
    return f"{value:g}"


def _nodes_said(nodes: Sequence[NodeCapacity]) -> str:
    return "; ".join(f"{node.name}: {_count(node.gpus)} GPUs, {_count(node.cpus)} CPUs" for node in nodes) or "none"


def _packs(placement: RunPlacement, nodes: Sequence[NodeCapacity]) -> bool:
    """First fit, largest bundles first: exact for this rule's bundles (one size of engine or colocated group,
    and single GPUs), since how the large ones sit never changes the room left for the single GPUs."""
    free = [[node.gpus, node.cpus] for node in nodes]
    for bundle in sorted(placement.bundles, key=lambda bundle: (bundle.gpus, bundle.cpus), reverse=True):
        for room in free:
            if room[0] >= bundle.gpus and room[1] >= bundle.cpus:
                room[0] -= bundle.gpus
                room[1] -= bundle.cpus
                break
        else:
            return False
    return True


def placement_problems(placement: RunPlacement, nodes: Sequence[NodeCapacity]) -> list[str]:
    """Why ``placement`` can never be granted on a cluster of ``nodes`` (each node's total resources); empty
    when some layout of the cluster fits it, busy or not (Ray then keeps it pending until the GPUs free up).
    Each problem gives the run's bundles, every node's numbers and what to change."""
    largest_gpus = max((node.gpus for node in nodes), default=0.0)
    largest_cpus = max((node.cpus for node in nodes), default=0.0)
    problems = []
    for bundle in {(bundle.role, bundle.gpus, bundle.cpus): bundle for bundle in placement.bundles}.values():
        if bundle.gpus > largest_gpus:
            what = "a tensor-parallel group of rollout.vllm_tensor_parallel_size GPUs" if bundle.gpus > 1 else "one GPU"
            problems.append(
                f"the run needs {_count(bundle.gpus)} GPUs on one node for {what} ({bundle.role}), but the largest "
                f"node has {_count(largest_gpus)} (per node: {_nodes_said(nodes)}); lower "
                f"rollout.vllm_tensor_parallel_size to at most {_count(largest_gpus)} or add a node with "
                f"{_count(bundle.gpus)} GPUs")
        elif bundle.cpus > largest_cpus:
            problems.append(
                f"the run needs {_count(bundle.cpus)} CPUs on one node for one {bundle.role} bundle "
                f"({_count(bundle.gpus)} GPUs × cluster.cpus_per_worker), but the largest node has "
                f"{_count(largest_cpus)} (per node: {_nodes_said(nodes)}); lower cluster.cpus_per_worker")
    if not problems and not _packs(placement, nodes):
        problems.append(
            f"the run's {len(placement.bundles)} bundles ({_count(placement.gpus)} GPUs, {_count(placement.cpus)} "
            f"CPUs in all) fit no layout of the cluster's nodes (per node: {_nodes_said(nodes)}); lower "
            "cluster.num_gpus or cluster.cpus_per_worker, or add nodes")
    return problems
