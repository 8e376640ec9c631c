"""What a run sends between nodes, predicted from its node layout: how many bytes cross the network each step, and
how long they take at the network's bandwidth. Pure Python, no torch: the memory plan and the step-time model
both read it (``python -m trainer memory-plan`` and ``step-time``, ``--nodes N --gpus-per-node G
--network-gbps B``).

**Where the run's parts sit.** The run's bundles are the one placement rule's (trainer/cluster/placement.py,
``run_placement``): one per learner GPU, then one per rollout engine holding its tensor-parallel GPUs; a synchronous
run's ranks are its engines too, one bundle per tensor-parallel group of them. Ray's PACK puts them on as few
nodes as hold them; ``place`` predicts where, by laying the bundles out in the order the driver reserves them,
each on the first node with GPUs left for all of it (an assumption of this prediction: Ray does not promise an
order). The driver holds no GPU; the bundles' CPUs are not laid out here.

**What crosses the network, each step** (``cross_node_traffic``), through the busiest node's link, one direction:

- the learner's FSDP collectives, when its ranks span nodes: an all-gather of the parameters (in the learner's
  compute dtype, FSDP's ``param_dtype``) for each π_old forward pass, and two for each trained micro-batch (its
  forward, and its backward, which gathers again: FSDP2 reshards after the forward), and a reduce-scatter of the
  gradients (float32, FSDP's ``reduce_dtype``) for each trained micro-batch. A ring collective of S bytes over R
  ranks carries (R − 1)/R · S over each node's link;
- the weight push, once a step: the full weights in the engines' serving dtype, bucketed and broadcast from learner
  rank 0 over a collective group (NCCL on GPUs) to every rollout engine. A pipelined broadcast takes the payload
  into each other node once, so the busiest link carries it once when any engine sits on another node than rank 0,
  and nothing crosses when all do not;
- the scored batch (gloo, host memory): each answer's token ids (int64) and text from the engines on other nodes
  than rank 0 to it, then the whole scored batch from rank 0 to each learner rank on another node;
- Lean requests to kimina-lean-server and events to Redis leave the GPU nodes in every layout, one node or many
  (``ServiceTraffic``): their bytes are listed, and they do not travel between GPU nodes.

Every time here is a prediction at an assumed bandwidth, with no overlap of communication and compute (an upper
bound: FSDP2 prefetches the next layer's all-gather while the current one computes); every figure carries the
source of its inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from trainer.cluster.placement import Role, RunPlacement, run_placement

# InfiniBand NDR: one 400 Gb/s port per node. A DGX H100 has eight (3.2 Tb/s); 100 Gb/s is a common Ethernet.
DEFAULT_NETWORK_GBPS = 400.0
NETWORK_SOURCE = "assumed: {gbps:g} Gb/s per node, one direction ({default})"
DEFAULT_NETWORK_WORDS = "InfiniBand NDR, one 400 Gb/s port per node; --network-gbps 100 for 100 Gb/s Ethernet"
TOKEN_ID_BYTES = 8  # int64, as torch keeps token ids
# Assumed: bytes of text per generated token (byte-pair tokens of English and Lean average about 4 characters).
TEXT_BYTES_PER_TOKEN = 4
# Assumed: a Lean request carries the answer's Lean block, not its reasoning; its reply, REPL messages.
LEAN_REQUEST_BYTES = 4_000
LEAN_REPLY_BYTES = 2_000


class LayoutError(ValueError):
    """The layout cannot hold the run: what was wrong, the values, and the fix."""


@dataclass(frozen=True)
class NodeLayout:
    """The GPU nodes a run is placed on and the network between them."""

    nodes: int = 1
    gpus_per_node: int = 8
    network_gbps: float = DEFAULT_NETWORK_GBPS

    def __post_init__(self):
        if self.nodes < 1:
            raise LayoutError(f"--nodes {self.nodes}: a run is placed on at least one node; give 1 or more")
        if self.gpus_per_node < 1:
            raise LayoutError(f"--gpus-per-node {self.gpus_per_node}: a GPU node has at least one GPU; give 1 or more")
        if not self.network_gbps > 0:
            raise LayoutError(f"--network-gbps {self.network_gbps:g}: the network's bandwidth per node in Gb/s must "
                              f"be more than 0, e.g. 400 (InfiniBand NDR) or 100 (Ethernet)")

    @property
    def bytes_per_second(self) -> float:
        return self.network_gbps * 1e9 / 8

    @property
    def network_source(self) -> str:
        default = "the default: " + DEFAULT_NETWORK_WORDS if self.network_gbps == DEFAULT_NETWORK_GBPS else "given"
        return NETWORK_SOURCE.format(gbps=self.network_gbps, default=default)

    def describe(self) -> str:
        return f"{self.nodes} node(s) × {self.gpus_per_node} GPUs, {self.network_gbps:g} Gb/s per node"


@dataclass(frozen=True)
class Placement:
    """The node of each learner rank and each rollout engine (engines: the node of all their GPUs)."""

    layout: NodeLayout
    learner_rank_nodes: tuple[int, ...]
    engine_nodes: tuple[int, ...]
    is_shared: bool  # the engines share the learner's GPUs (no rollout pool)

    @property
    def learner_nodes(self) -> int:
        return len(set(self.learner_rank_nodes))

    @property
    def rank0_node(self) -> int:
        return self.learner_rank_nodes[0]

    @property
    def engines_off_rank0_node(self) -> int:
        return sum(node != self.rank0_node for node in self.engine_nodes)

    @property
    def learner_ranks_off_rank0_node(self) -> int:
        return sum(node != self.rank0_node for node in self.learner_rank_nodes)

    def describe(self) -> str:
        lines = []
        for node in range(self.layout.nodes):
            ranks = [rank for rank, at in enumerate(self.learner_rank_nodes) if at == node]
            engines = [engine for engine, at in enumerate(self.engine_nodes) if at == node]
            parts = []
            if ranks:
                parts.append(f"learner ranks {_span(ranks)}")
            if engines:
                parts.append(f"rollout engines {_span(engines)}" + (" (sharing those GPUs)" if self.is_shared else ""))
            lines.append(f"node {node}: " + (", ".join(parts) if parts else "nothing of this run"))
        return "; ".join(lines)


def _span(numbers: list[int]) -> str:
    return str(numbers[0]) if len(numbers) == 1 else f"{numbers[0]}–{numbers[-1]}"


def place(layout: NodeLayout, bundles: RunPlacement) -> Placement:
    """Where the run's ``bundles`` land on ``layout``, PACKed node by node in their order (the module's docstring)."""
    capacity = layout.nodes * layout.gpus_per_node
    if bundles.gpus > capacity:
        raise LayoutError(f"the layout's {layout.nodes} node(s) × {layout.gpus_per_node} GPUs = {capacity} GPUs cannot "
                          f"hold the run's {bundles.gpus} (cluster.num_gpus); give more --nodes or --gpus-per-node, or "
                          f"fewer cluster.num_gpus")
    free = [layout.gpus_per_node] * layout.nodes
    rank_nodes: dict[int, int] = {}
    engine_nodes: list[int] = []
    for index, bundle in enumerate(bundles.bundles):
        what = f"bundle {index} ({bundle.role}, {bundle.gpus} GPUs)"
        if bundle.gpus > layout.gpus_per_node:
            raise LayoutError(f"{what} is more than a node's {layout.gpus_per_node} GPUs (--gpus-per-node): a "
                              f"tensor-parallel group lives on one node; lower rollout.vllm_tensor_parallel_size to "
                              f"{layout.gpus_per_node} or less, or give a larger --gpus-per-node")
        node = next((node for node, left in enumerate(free) if left >= bundle.gpus), None)
        if node is None:
            raise LayoutError(f"{what} needs {bundle.gpus} GPUs on one node and no node of {layout.describe()} has "
                              f"them left once the bundles before it are placed; give more --nodes, or a "
                              f"--gpus-per-node that rollout.vllm_tensor_parallel_size divides")
        free[node] -= bundle.gpus
        rank_nodes.update({rank: node for rank in bundle.ranks})
        if bundle.engine is not None or bundle.role is Role.COLOCATED:
            engine_nodes.append(node)
    return Placement(layout, tuple(rank_nodes[rank] for rank in sorted(rank_nodes)), tuple(engine_nodes),
                     is_shared=any(bundle.role is Role.COLOCATED for bundle in bundles.bundles))


@dataclass(frozen=True)
class ModelBytes:
    """The model's size as the network sees it."""

    parameters: float
    gather_dtype_bytes: int  # the learner's compute dtype: FSDP's param_dtype, which its all-gathers move
    push_dtype_bytes: int  # the engines' serving dtype, which the push moves
    source: str

    @property
    def gathered_bytes(self) -> float:
        return self.parameters * self.gather_dtype_bytes

    @property
    def gradient_bytes(self) -> float:
        return self.parameters * 4  # float32: FSDP's reduce_dtype

    @property
    def push_bytes(self) -> float:
        return self.parameters * self.push_dtype_bytes


@dataclass(frozen=True)
class StepShape:
    """What one step moves besides the weights: its answers and its learner passes."""

    rollouts: int
    prompt_tokens: float  # mean per rollout
    answer_tokens: float  # mean per rollout
    micro_batches_per_rank: int  # trained micro-batches of one learner rank in one step (every mini-batch)
    old_logprob_passes_per_rank: int  # π_old's forward passes of one learner rank in one step
    lean_reach_share: float
    source: str


@dataclass(frozen=True)
class Crossing:
    """One kind of traffic: bytes through the busiest node's link each step, and the time at the bandwidth."""

    name: str
    bytes_per_step: float
    seconds_per_step: float
    how: str  # how the bytes were counted, in words

    def as_dict(self) -> dict:
        return {"name": self.name, "bytes_per_step": round(self.bytes_per_step),
                "seconds_per_step": round(self.seconds_per_step, 4), "how": self.how}


@dataclass(frozen=True)
class ServiceTraffic:
    """Bytes each step sends to services off the GPU nodes, in every layout."""

    lean_bytes_per_step: float
    redis_bytes_per_step: float
    how: str


@dataclass
class CrossNodeTraffic:
    layout: NodeLayout
    placement: Placement
    crossings: list[Crossing]
    services: ServiceTraffic
    sources: dict[str, str] = field(default_factory=dict)

    def crossing(self, name: str) -> Crossing:
        return next(item for item in self.crossings if item.name == name)

    @property
    def seconds_per_step(self) -> float:
        return sum(item.seconds_per_step for item in self.crossings)

    @property
    def bytes_per_step(self) -> float:
        return sum(item.bytes_per_step for item in self.crossings)

    def as_dict(self) -> dict:
        return {
            "what": "predicted cross-node traffic per training step (a prediction at an assumed bandwidth, no overlap "
                    "with compute: an upper bound), through the busiest node's network link, one direction",
            "layout": {"nodes": self.layout.nodes, "gpus_per_node": self.layout.gpus_per_node,
                       "network_gbps": self.layout.network_gbps, "source": self.layout.network_source},
            "placement": self.placement.describe(),
            "crossings": [item.as_dict() for item in self.crossings],
            "total_bytes_per_step": round(self.bytes_per_step),
            "total_seconds_per_step": round(self.seconds_per_step, 4),
            "services": {"lean_bytes_per_step": round(self.services.lean_bytes_per_step),
                         "redis_bytes_per_step": round(self.services.redis_bytes_per_step),
                         "how": self.services.how},
            "sources": self.sources,
        }


WEIGHT_PUSH = "weight push"
FSDP_COLLECTIVES = "learner FSDP collectives"
SCORED_BATCH = "scored batch exchange"


def weight_push(placement: Placement, model: ModelBytes) -> Crossing:
    """The push from learner rank 0 to every engine: the full weights across once, or nothing when every engine
    sits on rank 0's node."""
    crosses = placement.engines_off_rank0_node > 0
    pushed = model.push_bytes if crosses else 0.0
    how = (f"full weights, {model.parameters / 1e9:.2f} B parameters × {model.push_dtype_bytes} bytes (the engines' "
           f"serving dtype), broadcast once into each node holding an engine ({placement.engines_off_rank0_node} of "
           f"{len(placement.engine_nodes)} engines off learner rank 0's node)" if crosses else
           "every rollout engine sits on learner rank 0's node: the push stays inside it (NVLink)")
    return Crossing(WEIGHT_PUSH, pushed, pushed / placement.layout.bytes_per_second, how)


def fsdp_collectives(placement: Placement, model: ModelBytes, shape: StepShape) -> Crossing:
    """The learner's all-gathers and reduce-scatters, when its ranks span nodes (ring: (R − 1)/R of each)."""
    ranks = len(placement.learner_rank_nodes)
    if placement.learner_nodes <= 1:
        return Crossing(FSDP_COLLECTIVES, 0.0, 0.0, f"all {ranks} learner ranks on one node: FSDP stays inside it")
    ring = (ranks - 1) / ranks
    gathers = shape.old_logprob_passes_per_rank + 2 * shape.micro_batches_per_rank
    scatters = shape.micro_batches_per_rank
    moved = ring * (gathers * model.gathered_bytes + scatters * model.gradient_bytes)
    how = (f"{ranks} ranks over {placement.learner_nodes} nodes, ring share {ranks - 1}/{ranks}: {gathers} all-gathers "
           f"of {model.gathered_bytes / 1e9:.2f} GB ({shape.old_logprob_passes_per_rank} π_old passes + 2 × "
           f"{shape.micro_batches_per_rank} trained micro-batches) and {scatters} reduce-scatters of "
           f"{model.gradient_bytes / 1e9:.2f} GB (float32 gradients) per rank and step")
    return Crossing(FSDP_COLLECTIVES, moved, moved / placement.layout.bytes_per_second, how)


def scored_batch(placement: Placement, shape: StepShape) -> Crossing:
    """Answers from the engines off rank 0's node to it, then the scored batch to each learner rank off it."""
    per_rollout = (shape.prompt_tokens + shape.answer_tokens) * TOKEN_ID_BYTES + shape.answer_tokens * TEXT_BYTES_PER_TOKEN
    batch = shape.rollouts * per_rollout
    engines = len(placement.engine_nodes)
    answers_in = batch * placement.engines_off_rank0_node / engines if engines else 0.0
    fanned_out = batch * placement.learner_ranks_off_rank0_node
    moved = answers_in + fanned_out
    how = (f"{shape.rollouts} rollouts × {per_rollout / 1e3:.0f} kB (token ids as int64, text at "
           f"{TEXT_BYTES_PER_TOKEN} bytes a token, assumed): the answers of {placement.engines_off_rank0_node} "
           f"engine(s) off learner rank 0's node to it, then the batch to {placement.learner_ranks_off_rank0_node} "
           f"learner rank(s) off it (gloo, host memory)")
    return Crossing(SCORED_BATCH, moved, moved / placement.layout.bytes_per_second, how)


def service_traffic(shape: StepShape) -> ServiceTraffic:
    lean = shape.rollouts * shape.lean_reach_share * (LEAN_REQUEST_BYTES + LEAN_REPLY_BYTES)
    # Each rollout's stored event carries its text; the live progress stream sends it about once more.
    redis = shape.rollouts * shape.answer_tokens * TEXT_BYTES_PER_TOKEN * 2
    how = (f"Lean: {shape.lean_reach_share:.0%} of {shape.rollouts} answers × ({LEAN_REQUEST_BYTES:,} + "
           f"{LEAN_REPLY_BYTES:,}) bytes (assumed request and reply sizes); Redis: each answer's text twice (its "
           f"rollout_finished event and the live progress), {TEXT_BYTES_PER_TOKEN} bytes a token (assumed). They "
           f"leave the GPU nodes in every layout, one node or many, and do not travel between them")
    return ServiceTraffic(lean, redis, how)


def cross_node_traffic(placement: Placement, model: ModelBytes, shape: StepShape) -> CrossNodeTraffic:
    return CrossNodeTraffic(
        layout=placement.layout, placement=placement,
        crossings=[weight_push(placement, model), fsdp_collectives(placement, model, shape),
                   scored_batch(placement, shape)],
        services=service_traffic(shape),
        sources={"network_gbps": placement.layout.network_source, "model": model.source, "step": shape.source},
    )


def placement_for(config, layout: NodeLayout) -> Placement:
    """``config``'s run on ``layout``: the one placement rule's bundles, laid out node by node."""
    if config.cluster.num_gpus == 0:
        raise LayoutError(f"preset {config.preset!r} runs on CPU (cluster.num_gpus 0), in one process on one machine: "
                          "a node layout is for GPU runs; leave out --nodes, --gpus-per-node and --network-gbps")
    return place(layout, run_placement(config))


def micro_batches_per_rank(config, learner_ranks: int, sequence_tokens: float) -> int:
    """A learner rank's trained micro-batches in one step: its share of each mini-batch's sequences, packed into
    ``optimizer.micro_batch_tokens`` (or grouped by ``micro_batch_sequences``), every mini-batch of the step."""
    rollout, optimizer = config.rollout, config.optimizer
    mini_batches = max(1, rollout.prompts_per_step // optimizer.mini_batch_prompts)
    sequences = math.ceil(optimizer.mini_batch_prompts * rollout.samples_per_prompt / learner_ranks)
    if optimizer.micro_batch_tokens:
        per_mini = math.ceil(sequences / max(1, optimizer.micro_batch_tokens // max(1, int(sequence_tokens))))
    else:
        per_mini = math.ceil(sequences / optimizer.micro_batch_sequences)
    return mini_batches * per_mini


# --- the command line: one home for the layout's options --------------------------------------------------


def add_node_layout_arguments(parser) -> None:
    parser.add_argument("--nodes", type=int, default=None,
                        help="GPU nodes the run is placed on (default: 1). With it, the command predicts what "
                             "crosses the network each step.")
    parser.add_argument("--gpus-per-node", type=int, default=None,
                        help="GPUs of each node (default: cluster.num_gpus spread evenly over --nodes).")
    parser.add_argument("--network-gbps", type=float, default=None,
                        help=f"The network's bandwidth per node in Gb/s, one direction (default "
                             f"{DEFAULT_NETWORK_GBPS:g}: {DEFAULT_NETWORK_WORDS}).")


def node_layout_from(args, config) -> NodeLayout | None:
    """The layout the options name, or None when none is given (the command's report is then unchanged)."""
    if args.nodes is None and args.gpus_per_node is None and args.network_gbps is None:
        return None
    nodes = 1 if args.nodes is None else args.nodes
    gpus_per_node = args.gpus_per_node
    if gpus_per_node is None:
        gpus_per_node = max(1, math.ceil(config.cluster.num_gpus / max(nodes, 1)))
    network = DEFAULT_NETWORK_GBPS if args.network_gbps is None else args.network_gbps
    return NodeLayout(nodes=nodes, gpus_per_node=gpus_per_node, network_gbps=network)


def rerun_words(layout: NodeLayout | None) -> list[str]:
    if layout is None:
        return []
    return [f"--nodes {layout.nodes}", f"--gpus-per-node {layout.gpus_per_node}", f"--network-gbps {layout.network_gbps:g}"]


def percent(share: float) -> str:
    """A share as a percentage to 3 significant digits: a small share must not read as 0%."""
    return f"{share * 100:.3g}%"


def format_traffic(traffic: CrossNodeTraffic, step_time_s: float | None = None) -> list[str]:
    """The traffic as lines for people; with ``step_time_s``, each crossing's share of the predicted step."""
    lines = [f"cross-node traffic, PREDICTED per step on {traffic.layout.describe()} ({traffic.layout.network_source}; "
             "no overlap with compute: an upper bound)",
             f"  placement (one placement group, PACK): {traffic.placement.describe()}",
             f"  model: {traffic.sources['model']}",
             f"  step: {traffic.sources['step']}"]
    for item in traffic.crossings:
        share = f", {percent(item.seconds_per_step / step_time_s)} of the predicted step" if step_time_s else ""
        lines.append(f"  {item.name}: {item.bytes_per_step / 1e9:.3f} GB, {item.seconds_per_step:.3f} s{share}")
        lines.append(f"      {item.how}")
    total_share = f", {percent(traffic.seconds_per_step / step_time_s)} of the predicted step" if step_time_s else ""
    lines.append(f"  total between nodes: {traffic.bytes_per_step / 1e9:.3f} GB, {traffic.seconds_per_step:.3f} s"
                 f"{total_share}")
    services = traffic.services
    lines.append(f"  to services, in every layout: Lean {services.lean_bytes_per_step / 1e6:.1f} MB, Redis "
                 f"{services.redis_bytes_per_step / 1e6:.1f} MB per step")
    lines.append(f"      {services.how}")
    return lines
