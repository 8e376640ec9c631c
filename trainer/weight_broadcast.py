"""The learner's weights, broadcast to the rollout pool after each update, as verl's one-step-off-policy does.

An asynchronous run on GPUs (``rollout.max_staleness`` ≥ 1, ``cluster.rollout_gpus`` > 0;
trainer/staleness.py) keeps two pools. On 8×H100 with ``cluster.rollout_gpus`` 2::

    GPU 0-5  learner pool: FSDP2 over 6 ranks (each holds 1/6 of the float32 weights, gradients
             and AdamW's moments); rank 0 is also the broadcast's source
    GPU 6-7  rollout pool: vLLM (2 engines of tensor-parallel size 1, or 1 of size 2), generating
             the next batches while the learner trains; each holds vLLM's weights in the rollout
             dtype and its key/value cache, and nothing of the learner

After each update every learner rank calls ``WeightBroadcaster.send(model)``: FSDP gathers each
parameter whole on every learner rank (``full_tensor`` is a collective, as under
``VllmEngine.push_weights``), and learner rank 0 alone casts it to the rollout dtype and streams
its bytes to the rollout ranks through a process group of its own (learner rank 0 and the rollout
pool), in buckets of at most ``bucket_bytes``: a parameter larger than a bucket spans several, and
neither side ever holds more than one bucket and one parameter beyond its model. Every rollout rank
calls ``receive_into(engine_or_model)``, which assembles each parameter and hands it, by checkpoint
name, to the engine's ``load_weights`` (``VllmEngine.load_weights``: each tensor-parallel shard keeps
its part, as when vLLM reads a checkpoint) or copies it into a module's parameter. The memory plan
counts those buffers (trainer/memory_plan.py, ``BroadcastMemory``).

Before the bytes, the source sends the parameter list (names, shapes, dtypes) and the policy
version; every rollout rank checks it against what it expects, and the whole group learns the
first mismatch from an all-gather of their verdicts, so a mismatched model fails on both sides with
the same message instead of hanging or loading the wrong tensors.

NCCL on GPUs; the same code runs on the gloo backend on CPU, where the tests run it for real in
three processes (tests/learner/test_the_rollout_pool_receives_exactly_the_learners_weights.py).
Independent of the driver, and not on its path today: the asynchronous GPU loop's rollout pool is
generator processes that learner rank 0 starts and sends the gathered weights through shared memory
(trainer/distributed.py), outside any process group. This module is the NCCL path for a pool that
joins one; the memory plan still counts its buffers.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from trainer.rollout.weights import checkpoint_name, iter_full_weights

# One bucket in flight: large enough that NCCL runs near its bandwidth (hundreds of MiB per call,
# as verl's update_weights_bucket_megabytes), small beside an 80 GiB GPU; the memory plan counts it.
BROADCAST_BUCKET_BYTES = 256 * 1024**2


@dataclass(frozen=True)
class ParameterSpec:
    """One parameter as it travels: its checkpoint name, shape and dtype on the wire."""

    name: str
    shape: tuple[int, ...]
    dtype: str  # torch's name without "torch.", e.g. "bfloat16"

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.torch_dtype.itemsize


@dataclass(frozen=True)
class BroadcastReport:
    """What one broadcast moved, the same on both sides."""

    version: int | None
    parameters: int
    bytes: int
    buckets: int
    largest_bucket_bytes: int
    seconds: float


def weight_manifest(model: nn.Module, dtype: torch.dtype | None = None) -> list[ParameterSpec]:
    """The parameters ``model`` sends or expects, by checkpoint name, tied ones once, gathering nothing.

    A sharded parameter (FSDP2's DTensor) reports its whole shape; a model on the meta device works
    too, so a rollout process can state what it expects from the architecture alone.
    """
    return [ParameterSpec(checkpoint_name(name), tuple(parameter.shape),
                          str(dtype or parameter.dtype).removeprefix("torch."))
            for name, parameter in model.named_parameters()]


def new_broadcast_group(source_rank: int, rollout_ranks: Sequence[int], backend: str | None = None):
    """The process group of learner rank ``source_rank`` and the rollout pool's ranks.

    torch.distributed's rule: every rank of the world calls this, in the same order as its other
    ``new_group`` calls, members or not; a non-member gets ``GroupMember.NON_GROUP_MEMBER``.
    """
    if source_rank in rollout_ranks:
        raise ValueError(f"learner rank {source_rank} is also listed as a rollout rank ({list(rollout_ranks)}); the "
                         "two pools share no GPU")
    if not rollout_ranks:
        raise ValueError("a weight broadcast needs at least one rollout rank; set cluster.rollout_gpus ≥ 1")
    return dist.new_group(ranks=[source_rank, *sorted(rollout_ranks)], backend=backend)


class ManifestMismatch(ValueError):
    """The learner and a rollout rank disagree on the parameters: different models in the two pools."""


class WeightBroadcaster:
    """One end of the broadcast: learner ranks ``send``, rollout ranks ``receive_into``.

    ``group`` is ``new_broadcast_group``'s answer (``NON_GROUP_MEMBER`` on learner ranks other
    than the source, which still call ``send``: FSDP's gather needs them), or None when the world
    is exactly learner rank 0 and the rollout ranks. ``source_rank`` is
    learner rank 0's rank in the world. ``dtype`` is the rollout engine's (the learner keeps float32
    master weights and sends half the bytes to a bfloat16 engine); ``device`` holds the bucket
    (the GPU under NCCL, the CPU under gloo).
    """

    def __init__(self, group, *, source_rank: int = 0, bucket_bytes: int = BROADCAST_BUCKET_BYTES,
                 dtype: torch.dtype | None = None, device: torch.device | str | None = None) -> None:
        if bucket_bytes < 1:
            raise ValueError(f"bucket_bytes must be at least 1, got {bucket_bytes}")
        self.group = group
        self.source_rank = source_rank
        self.bucket_bytes = bucket_bytes
        self.dtype = dtype
        self.device = torch.device(device) if device is not None else _default_device()
        self.is_member = group != dist.GroupMember.NON_GROUP_MEMBER  # None: the whole world is the group
        self.is_source = dist.get_rank() == source_rank

    # --- the learner's side -----------------------------------------------------------------------------

    def send(self, model: nn.Module, version: int | None = None) -> BroadcastReport | None:
        """Broadcast ``model``'s full weights (a collective over the learner's ranks: call it on every one).

        ``version`` is the policy version the weights are (updates applied); the rollout side gets it
        back in its report. Learner ranks other than the source take part in FSDP's gather only and
        return None.
        """
        if not self.is_source:
            for _ in iter_full_weights(model):  # FSDP's all-gather needs every learner rank; the tensors are dropped
                pass
            return None
        started = time.monotonic()
        manifest = weight_manifest(model, self.dtype)
        self._agree_on(manifest, version, problem=None)
        buffer = torch.empty(self.bucket_bytes, dtype=torch.uint8, device=self.device)
        filled, buckets, largest = 0, 0, 0
        for spec, (name, tensor) in zip(manifest, iter_full_weights(model, dtype=self.dtype), strict=True):
            if name != spec.name or tuple(tensor.shape) != spec.shape:  # the model changed under the broadcast
                raise RuntimeError(f"parameter {name} {tuple(tensor.shape)} does not match the list just sent "
                                   f"({spec.name} {spec.shape}); do not change the model while it is sent")
            data = _bytes_of(tensor.to(self.device))
            position = 0
            while position < data.numel():
                count = min(self.bucket_bytes - filled, data.numel() - position)
                buffer[filled:filled + count].copy_(data[position:position + count])
                filled, position = filled + count, position + count
                if filled == self.bucket_bytes:
                    self._broadcast(buffer)
                    buckets, largest, filled = buckets + 1, self.bucket_bytes, 0
        if filled:
            self._broadcast(buffer[:filled])
            buckets, largest = buckets + 1, max(largest, filled)
        return BroadcastReport(version, len(manifest), sum(spec.nbytes for spec in manifest), buckets, largest,
                               time.monotonic() - started)

    # --- the rollout pool's side ------------------------------------------------------------------------

    def receive_into(self, target: Any, expected: list[ParameterSpec] | None = None) -> BroadcastReport:
        """Receive one broadcast into ``target``: an ``nn.Module`` (copied into its parameters by checkpoint
        name), or an engine with ``load_weights(iterable of (name, tensor))`` (``VllmEngine``).

        ``expected`` is the parameter list the rollout side holds (``weight_manifest`` of the model, or of
        its architecture on the meta device); a module's own is used when it is None. An engine must be
        given one: vLLM's parameter names (fused q/k/v) are not the checkpoint's.
        """
        if not self.is_member or self.is_source:
            raise RuntimeError("receive_into runs on the rollout pool's ranks; learner ranks call send(model)")
        if expected is None:
            if not isinstance(target, nn.Module):
                raise ValueError(f"receive_into needs the parameter list a {type(target).__name__} expects: pass "
                                 "expected=weight_manifest(model) of the model it serves (meta device is enough)")
            expected = weight_manifest(target)
        started = time.monotonic()
        manifest, version = self._agree_on(expected, None, problem=_mismatch(expected))
        stream = _ReceivedParameters(self, manifest)
        if isinstance(target, nn.Module):
            _copy_into_module(target, stream)
        else:
            target.load_weights(stream)
        stream.check_all_received()
        return BroadcastReport(version, len(manifest), stream.total_bytes, stream.buckets, stream.largest_bucket,
                               time.monotonic() - started)

    # --- both sides ------------------------------------------------------------------------------------

    def _agree_on(self, manifest: list[ParameterSpec], version: int | None, problem):
        """The source's parameter list and version reach every member, and every member's verdict every member.

        ``problem`` (rollout side) maps the received list to a mismatch message or None. All raise on the
        first mismatch, so no side waits for bytes that will never come.
        """
        sent = [manifest, version, self.bucket_bytes] if self.is_source else [None, None, None]
        dist.broadcast_object_list(sent, src=self.source_rank, group=self.group, device=self._object_device())
        received, version, bucket_bytes = sent
        if bucket_bytes != self.bucket_bytes:
            verdict = (f"rank {dist.get_rank()} was built with bucket_bytes {self.bucket_bytes}, the learner with "
                       f"{bucket_bytes}; build every WeightBroadcaster with the same bucket_bytes")
        else:
            verdict = None if problem is None else problem(received)
        verdicts: list[str | None] = [None] * dist.get_world_size(self.group)
        dist.all_gather_object(verdicts, verdict, group=self.group)
        for rank_in_group, found in enumerate(verdicts):
            if found:
                rank = rank_in_group if self.group is None else dist.get_global_rank(self.group, rank_in_group)
                raise ManifestMismatch(f"weight broadcast refused by rank {rank} of the rollout pool: {found}")
        return received, version

    def _broadcast(self, tensor: torch.Tensor) -> None:
        dist.broadcast(tensor, src=self.source_rank, group=self.group)

    def _object_device(self) -> torch.device | None:
        return self.device if self.device.type == "cuda" else None


class _ReceivedParameters(Iterable[tuple[str, torch.Tensor]]):
    """The received parameters, one at a time, as the source's buckets arrive (iterate once)."""

    def __init__(self, broadcaster: WeightBroadcaster, manifest: list[ParameterSpec]) -> None:
        self.broadcaster = broadcaster
        self.manifest = manifest
        self.total_bytes = sum(spec.nbytes for spec in manifest)
        self.received_bytes = 0
        self.buckets = 0
        self.largest_bucket = 0
        self.parameters_given = 0

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        broadcaster = self.broadcaster
        buffer = torch.empty(broadcaster.bucket_bytes, dtype=torch.uint8, device=broadcaster.device)
        available, used = 0, 0
        for spec in self.manifest:
            tensor = torch.empty(spec.shape, dtype=spec.torch_dtype, device=broadcaster.device)
            data = _bytes_of(tensor)
            position = 0
            while position < data.numel():
                if used == available:  # the next bucket: as long as the source's, which the totals fix
                    available, used = min(broadcaster.bucket_bytes, self.total_bytes - self.received_bytes), 0
                    broadcaster._broadcast(buffer[:available])
                    self.received_bytes += available
                    self.buckets += 1
                    self.largest_bucket = max(self.largest_bucket, available)
                count = min(available - used, data.numel() - position)
                data[position:position + count].copy_(buffer[used:used + count])
                used, position = used + count, position + count
            self.parameters_given += 1
            yield spec.name, tensor

    def check_all_received(self) -> None:
        if self.parameters_given != len(self.manifest):
            raise RuntimeError(f"the rollout side's loader took {self.parameters_given} of the "
                               f"{len(self.manifest)} parameters broadcast; its load_weights must consume them all, "
                               "or the next broadcast would read this one's bytes")


def _copy_into_module(module: nn.Module, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    parameters = {checkpoint_name(name): parameter for name, parameter in module.named_parameters()}
    with torch.no_grad():
        for name, tensor in weights:
            parameters[name].copy_(tensor)


def _mismatch(expected: list[ParameterSpec]):
    """The rollout side's verdict on the source's list: which names and shapes differ, or None."""

    def verdict(received: list[ParameterSpec]) -> str | None:
        sent = {spec.name: spec.shape for spec in received}
        held = {spec.name: spec.shape for spec in expected}
        extra = [name for name in sent if name not in held]
        missing = [name for name in held if name not in sent]
        reshaped = [f"{name} (learner {sent[name]}, rollout {held[name]})" for name in sent
                    if name in held and sent[name] != held[name]]
        if not (extra or missing or reshaped):
            return None
        parts = []
        if extra:
            parts.append(f"the learner sends {len(extra)} parameter(s) the rollout side does not hold: {_few(extra)}")
        if missing:
            parts.append(f"the rollout side holds {len(missing)} the learner does not send: {_few(missing)}")
        if reshaped:
            parts.append(f"{len(reshaped)} differ in shape: {_few(reshaped)}")
        return ("; ".join(parts) + ". The two pools must serve one architecture: build the rollout engine from the "
                "run's model (model.name_or_path, or the checkpoint the learner started from)")

    return verdict


def _few(items: list[str], shown: int = 3) -> str:
    more = f", and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def _bytes_of(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s memory as a flat uint8 view (no copy for a contiguous tensor)."""
    return tensor.contiguous().reshape(-1).view(torch.uint8)


def _default_device() -> torch.device:
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
