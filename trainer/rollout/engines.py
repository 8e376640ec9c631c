"""The engine factory: which rollout engine a run's config names, built beside the engines it builds.

Apart from ``base`` (what every engine is), so that no engine imports a module that imports it
back. Each engine is imported when it is built: they load torch, transformers or vLLM.
"""

from __future__ import annotations

from typing import Any

from trainer.config import RolloutEngineKind, RunConfig
from trainer.rollout.base import RolloutEngine, rollout_dtype


def build_engine(config: RunConfig, model: Any, tokenizer: Any) -> RolloutEngine:
    """The engine ``config.rollout.engine`` names, sampling from the learner's ``model``.

    transformers samples from the learner's own module when it already holds ``model.dtype``
    weights, and from a copy in that precision otherwise (trainer/rollout/replica.py).
    """
    kind = config.rollout.engine
    if kind is RolloutEngineKind.TRANSFORMERS:
        dtype = rollout_dtype(config)
        if next(model.parameters()).dtype != dtype:
            from trainer.rollout.replica import ReplicaRolloutEngine

            return ReplicaRolloutEngine.of(model, tokenizer, dtype)
        from trainer.rollout.transformers_engine import TransformersEngine

        return TransformersEngine(model, tokenizer)
    if kind is RolloutEngineKind.VLLM:
        from trainer.rollout.vllm_engine import VllmEngine

        return VllmEngine.from_config(config, model, tokenizer)
    raise ValueError(f"unknown rollout.engine {kind!r}; choose one of {', '.join(k.value for k in RolloutEngineKind)}")
