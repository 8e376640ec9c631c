"""Asynchronous RL (rollout.max_staleness ≥ 1): the rollouts' side of the loop, the generator process (CPU) and the
rollout pool's engine actors (placed by the run's placement rule), fed over a weight group of their own.
Imports from the trainer: config, compute_dtype, ranks, cluster, verification, observability, recipe, learning,
rollout.
"""
