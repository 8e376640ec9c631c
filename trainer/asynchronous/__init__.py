"""Asynchronous RL (rollout.max_staleness ≥ 1): the rollouts' side of the loop and the generator processes.
Imports from the trainer: config, compute_dtype, verification, observability, recipe, learning, rollout.
"""
