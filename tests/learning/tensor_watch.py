"""A dispatch hook that sees every tensor any ATen operation returns: the tests that pin what the learner
never allocates (tokens × vocabulary, tokens × tokens) watch a whole step through it."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LargestTensorWatch(TorchDispatchMode):
    """Records the largest tensor any operation returns, and which operations ran."""

    def __init__(self):
        super().__init__()
        self.largest_numel = 0
        self.largest = ""
        self.operations: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        self.operations.add(str(func.overloadpacket))
        for value in tree_flatten(result)[0]:
            if isinstance(value, torch.Tensor) and value.numel() > self.largest_numel:
                self.largest_numel = value.numel()
                self.largest = f"{func} -> {tuple(value.shape)}"
        return result
