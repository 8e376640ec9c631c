"""Code that runs inside vLLM's worker processes, named to vLLM by its qualified name.

vLLM builds each worker class with ``worker_extension_cls`` mixed in, so ``collective_rpc``
can call these methods by name. That is how verl and vLLM's own RLHF examples reach the
workers: sending a Python function instead would need vLLM's insecure (pickle)
serialization turned on, since a multi-process engine otherwise refuses callables.

This module must not import vLLM at import time: the trainer names it on machines without
vLLM too (the tests' stand-in engine resolves the same name).
"""

from __future__ import annotations

import torch

EXTENSION_CLASS = "trainer.rollout.vllm_worker.LearnerWeightsReceiver"


class LearnerWeightsReceiver:
    """Mixed into each vLLM worker: loads the learner's weights by checkpoint name."""

    def load_learner_weights(self, weights: list[tuple[str, torch.Tensor]]) -> int:
        """Each rank keeps its own tensor-parallel shard (the model's own ``load_weights`` decides), through
        vLLM's in-place reload, as ``VllmEngine.push_weights`` does in process."""
        self.reload_weights(weights_iterator=weights, is_checkpoint_format=True)
        return len(weights)
