"""The RL loop: the training run (one process, or one per GPU), its evaluations, and an evaluation run.
Imports from the trainer: config, compute_dtype, ranks, verification, observability, recipe, learning,
rollout, run, asynchronous, sft.
"""
