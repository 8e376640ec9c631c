"""The weights' way from learner rank 0 to every rollout engine actor: one collective group spanning nodes.

An asynchronous run's engines are Ray actors on any node of the cluster (trainer/asynchronous/engine_actors.py),
so a push can go through neither ``/dev/shm`` nor a local path: rank 0 broadcasts it over a process group of its
own, rank 0 and one rank per engine, as OpenRLHF's learner does to its vLLM engines. gloo on CPU (and where CPU
processes stand in for GPUs), NCCL where the run's GPUs are real.

A group of its own, not the learner ranks' default one: its members (the engines) are no learner ranks, and a
broadcast to them waits until each engine has finished the jobs sent before the push, which the learner ranks'
collectives must never wait for. It is built directly on a ``TCPStore`` that rank 0 hosts at its node's address
(``torch.distributed.ProcessGroupGloo``/``ProcessGroupNCCL``), so nothing of ``torch.distributed``'s global state
(the default group of the learner ranks) is touched.

Bucketed: each flat tensor of a push (``packed_weights``: one per dtype) travels as byte slices of at most
``WEIGHT_BUCKET_BYTES``, so an engine holds one bucket in flight beside the weights it receives into, not a second
copy of the model on the wire, and a GPU run's NCCL buffer stays bounded. Whether the weights arrived intact is
checked every step by the train–inference gap (trainer/observability/gap.py), as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

# 64 MiB: large enough that a 1.7B model (3.4 GB at bfloat16) is ~50 broadcasts, each far above gloo's and NCCL's
# per-call latency; small enough that a bucket in flight is a rounding error of an engine's memory.
WEIGHT_BUCKET_BYTES = 64 * 1024 * 1024
# A push waits in the group until each engine has finished the jobs sent before it (rollout.max_staleness of them,
# minutes each at the recipe's 24k-token answers): the group's operations may wait that long. An engine's death ends
# the wait sooner (its socket closes), and the run hears of the death from the engine's handle anyway.
WEIGHT_GROUP_TIMEOUT = timedelta(hours=2)
# How long rank 0 waits for every engine to join the group at start-up (each engine's worker process starting).
WEIGHT_GROUP_JOIN_TIMEOUT = timedelta(minutes=10)
_PREFIX = "rollout-weights"


@dataclass(frozen=True)
class WeightGroupAddress:
    """Where the engines join rank 0's group: its store's host and port, the group's size and backend."""

    host: str
    port: int
    size: int  # rank 0 and one rank per engine
    backend: str  # "gloo" or "nccl"


@dataclass(frozen=True)
class FlatLayout:
    """One flat tensor of a push, without its data: what an engine allocates to receive it into."""

    names_and_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    dtype: Any  # torch.dtype
    numel: int


def weight_backend(uses_real_gpus: bool) -> str:
    return "nccl" if uses_real_gpus else "gloo"


def _process_group(store, rank: int, size: int, backend: str, host: str, timeout: timedelta):
    import torch.distributed as dist

    prefixed = dist.PrefixStore(_PREFIX, store)
    if backend == "nccl":
        options = dist.ProcessGroupNCCL.Options()
        options._timeout = timeout
        return dist.ProcessGroupNCCL(prefixed, rank, size, options)
    options = dist.ProcessGroupGloo._Options()
    options._timeout = timeout
    # Bound to this node's address: gloo's default device resolves the hostname, which is a loopback address on
    # many hosts, unreachable from the engines' nodes.
    options._devices = [dist.ProcessGroupGloo.create_device(hostname=host)]
    return dist.ProcessGroupGloo(prefixed, rank, size, options)


class WeightGroup:
    """One member's side of the group: rank 0 (``host``) sends, each engine (``join``) receives."""

    def __init__(self, group, rank: int, backend: str, store):
        self._group = group
        self.rank = rank
        self.backend = backend
        self._store = store  # kept alive: rank 0's store serves the group's rendezvous and its lifetime

    @classmethod
    def open_store(cls, host: str, engines: int, backend: str) -> tuple[Any, WeightGroupAddress]:
        """Rank 0's store, listening on a free port of ``host`` (its node's address); the engines join through it."""
        import torch.distributed as dist

        store = dist.TCPStore(host, 0, engines + 1, is_master=True, timeout=WEIGHT_GROUP_JOIN_TIMEOUT,
                              wait_for_workers=False)
        return store, WeightGroupAddress(host, store.port, engines + 1, backend)

    @classmethod
    def host(cls, store, address: WeightGroupAddress) -> WeightGroup:
        """Rank 0's member; returns once every engine has joined (they join at the same time, ``join``)."""
        group = _process_group(store, 0, address.size, address.backend, address.host, WEIGHT_GROUP_TIMEOUT)
        return cls(group, 0, address.backend, store)

    @classmethod
    def join(cls, address: WeightGroupAddress, rank: int, own_host: str) -> WeightGroup:
        import torch.distributed as dist

        store = dist.TCPStore(address.host, address.port, address.size, is_master=False,
                              timeout=WEIGHT_GROUP_JOIN_TIMEOUT)
        group = _process_group(store, rank, address.size, address.backend, own_host, WEIGHT_GROUP_TIMEOUT)
        return cls(group, rank, address.backend, store)

    def _device(self):
        import torch

        return torch.device("cuda", torch.cuda.current_device()) if self.backend == "nccl" else torch.device("cpu")

    def _broadcast(self, tensor) -> None:
        import torch.distributed as dist

        options = dist.BroadcastOptions()
        options.rootRank = 0
        self._group.broadcast([tensor], options).wait()

    def send(self, packed) -> None:
        """Rank 0: broadcast ``packed_weights``' output, bucket by bucket."""
        for _, flat in packed:
            as_bytes = flat.contiguous().view(-1).view(_byte_dtype())
            for start in range(0, as_bytes.numel(), WEIGHT_BUCKET_BYTES):
                bucket = as_bytes[start: start + WEIGHT_BUCKET_BYTES]
                if self.backend == "nccl":
                    bucket = bucket.to(self._device())
                self._broadcast(bucket)

    def receive(self, layouts: list[FlatLayout]) -> list[tuple[list[tuple[str, tuple]], Any]]:
        """An engine: one push, as ``packed_weights`` gave it to rank 0 (flat CPU tensors, by dtype)."""
        import torch

        packed = []
        for layout in layouts:
            flat = torch.empty(layout.numel, dtype=layout.dtype)
            as_bytes = flat.view(_byte_dtype())
            for start in range(0, as_bytes.numel(), WEIGHT_BUCKET_BYTES):
                bucket = as_bytes[start: start + WEIGHT_BUCKET_BYTES]
                if self.backend == "nccl":
                    on_gpu = bucket.to(self._device())
                    self._broadcast(on_gpu)
                    bucket.copy_(on_gpu)
                else:
                    self._broadcast(bucket)  # in place: a contiguous slice of ``flat``
            packed.append(([(name, tuple(shape)) for name, shape in layout.names_and_shapes], flat))
        return packed


def layouts_of(packed) -> list[FlatLayout]:
    """What an engine must know of a push to receive it: each flat tensor's names, shapes, dtype and size."""
    return [FlatLayout(tuple((name, tuple(shape)) for name, shape in names_and_shapes), flat.dtype, flat.numel())
            for names_and_shapes, flat in packed]


def push_bytes(packed) -> int:
    return sum(flat.numel() * flat.element_size() for _, flat in packed)


def buckets_of(packed) -> int:
    return sum(math.ceil(flat.numel() * flat.element_size() / WEIGHT_BUCKET_BYTES) for _, flat in packed)


def _byte_dtype():
    import torch

    return torch.uint8
