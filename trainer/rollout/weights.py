"""The learner's full weights, one tensor at a time, under the names a Hugging Face checkpoint uses.

A rollout engine that keeps its own copy of the policy (vLLM) loads them with the same
names as from disk. The learner may hold its parameters sharded (FSDP) or wrapped (DDP,
activation checkpointing, ``torch.compile``); each case is undone here, by name.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import nn

# Wrapper modules insert these into parameter names; a checkpoint never has them.
_WRAPPER_NAME_PARTS = ("_fsdp_wrapped_module.", "_checkpoint_wrapped_module.", "_orig_mod.")


def checkpoint_name(parameter_name: str) -> str:
    """``module._fsdp_wrapped_module.model.layers.0...`` → ``model.layers.0...``"""
    for part in _WRAPPER_NAME_PARTS:
        parameter_name = parameter_name.replace(part, "")
    return parameter_name.removeprefix("module.")  # DistributedDataParallel's single child


def iter_full_weights(model: nn.Module, dtype: torch.dtype | None = None) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(checkpoint name, full tensor)`` for every parameter, tied ones once.

    Sharded parameters are gathered, which is a collective: under FSDP every rank must
    run this loop to its end, even a rank that throws the tensors away. ``dtype`` casts
    each tensor as it is yielded, so a float32 learner sends half the bytes to a
    bfloat16 engine and never holds a second full copy of the model.
    """
    fsdp1 = _fsdp1_class()
    if fsdp1 is not None and isinstance(model, fsdp1):
        # FSDP1 flattens parameters; summon_full_params unflattens them, for reading only.
        with fsdp1.summon_full_params(model, writeback=False, rank0_only=False):
            for name, parameter in model.named_parameters():
                yield checkpoint_name(name), _cast(parameter.detach(), dtype)
        return
    for name, parameter in model.named_parameters():
        tensor = parameter.detach()
        if _is_dtensor(tensor):  # FSDP2 (fully_shard) or tensor-parallel shards
            tensor = tensor.full_tensor()
        yield checkpoint_name(name), _cast(tensor, dtype)


def _cast(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    return tensor if dtype is None or tensor.dtype == dtype else tensor.to(dtype)


def _is_dtensor(tensor: torch.Tensor) -> bool:
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed support
        return False
    return isinstance(tensor, DTensor)


def _fsdp1_class():
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
    except ImportError:
        return None
    return FullyShardedDataParallel
