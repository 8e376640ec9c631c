"""transformers sampling from a separate copy of the policy, refreshed after every update.

Two learners need one:

- a sharded learner (FSDP) cannot sample by itself: each forward pass gathers parameters
  from every rank, and ranks whose answers end at different lengths would wait on each other
  for ever, so each rank samples from its own full copy;
- a learner that keeps float32 master weights but computes in bfloat16 (``model.dtype``)
  samples fastest from a bfloat16 copy: one decoding step reads every weight once, so
  half the bytes is nearly half the time on a CPU (``benchmarks/cpu_rollout_precision.py``),
  where autocast would cast every weight again at every step.

``push_weights`` copies the learner's weights into the copy by name (casting them), as the
vLLM engine does into vLLM's.
"""

from __future__ import annotations

import copy
from typing import Any

import torch

from trainer.rollout.transformers_engine import TransformersEngine
from trainer.rollout.weights import iter_full_weights


class ReplicaRolloutEngine:
    """A ``TransformersEngine`` on a full copy of the policy, in ``dtype`` (default: the policy's)."""

    def __init__(self, replica, tokenizer):
        self.replica = replica
        self._engine = TransformersEngine(replica, tokenizer)

    @classmethod
    def of(cls, model, tokenizer, dtype: torch.dtype | None = None) -> ReplicaRolloutEngine:
        """A copy of ``model``'s architecture on its device, holding its current weights."""
        from transformers import AutoModelForCausalLM

        first_parameter = next(model.parameters())
        replica = AutoModelForCausalLM.from_config(model.config)
        replica.generation_config = copy.deepcopy(model.generation_config)
        replica.to(device=first_parameter.device, dtype=dtype or first_parameter.dtype)
        replica.eval().requires_grad_(False)
        engine = cls(replica, tokenizer)
        engine.push_weights(model)
        return engine

    def generate(self, prompts, sampling, progress=None, tools=None):
        if tools is None:
            return self._engine.generate(prompts, sampling, progress)
        return self._engine.generate(prompts, sampling, progress, tools=tools)

    def sleep(self) -> None:
        self._engine.sleep()

    def wake(self) -> None:
        self._engine.wake()

    @torch.no_grad()
    def push_weights(self, model: Any) -> None:
        """Copy ``model``'s full weights into the replica (a collective under FSDP: every rank calls it)."""
        own = dict(self.replica.named_parameters())
        unknown, copied = [], set()
        # The loop runs to its end even on a mismatch: stopping early would strand the other ranks.
        for name, tensor in iter_full_weights(model):
            if name in own and own[name].shape == tensor.shape:
                own[name].copy_(tensor)
                copied.add(name)
            else:
                unknown.append(name)
        missing = sorted(set(own) - copied)
        if unknown or missing:
            raise ValueError(
                f"the rollout copy of the policy does not match the learner's weights (unknown or misshapen: "
                f"{unknown[:5]}, not sent: {missing[:5]}); the policy's config must rebuild the same architecture"
            )

    def close(self) -> None:
        self._engine.close()
