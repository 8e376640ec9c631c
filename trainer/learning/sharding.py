"""The learner's ranks: joining the process group a Ray worker or torchrun describes, and sharding the model with FSDP2."""

from __future__ import annotations

import os

import torch


def decoder_layer_classes(model) -> set[type]:
    """The transformer block classes FSDP shards one by one: the model's own ``_no_split_modules``."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    classes = {type(module) for module in model.modules() if type(module).__name__ in names}
    if not classes:
        raise ValueError(
            f"cannot find the decoder layers of {type(model).__name__} to shard (its _no_split_modules is "
            f"{sorted(names) or 'empty'}); use a Hugging Face causal LM that declares them"
        )
    return classes


def shard_with_fsdp(model, param_dtype: torch.dtype) -> torch.nn.Module:
    """FSDP2: each decoder layer its own unit, then the root; master weights stay float32."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mixed_precision = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=torch.float32)
    layer_classes = tuple(decoder_layer_classes(model))
    for module in model.modules():
        if isinstance(module, layer_classes):
            fully_shard(module, mp_policy=mixed_precision)
    fully_shard(model, mp_policy=mixed_precision)
    return model


def is_distributed() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def init_distributed_from_env(num_gpus: int) -> bool:
    """Join the process group a Ray worker (or torchrun) describes in RANK/WORLD_SIZE/MASTER_ADDR.

    Returns whether this process is one of several learner ranks.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if num_gpus <= 1 or world_size <= 1:
        return False
    if not is_distributed():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend=backend)
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    return True
