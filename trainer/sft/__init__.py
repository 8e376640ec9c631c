"""The warm start before RL: supervised fine-tuning, its demonstrations, the cpu-smoke model, the build's status.
Imports from the trainer: config, compute_dtype, verification, observability, recipe, learning, rollout, run.

``warm_start_status`` is read by the platform and deploy/ without torch: this package imports nothing.
"""
