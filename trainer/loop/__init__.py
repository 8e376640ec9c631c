"""The RL loop: the training run (one process, or one learner-rank actor per GPU placed by its Ray driver), its
evaluations, and an evaluation run.
Imports from the trainer: config, command_line, compute_dtype, ranks, cluster, verification, observability, recipe,
learning, rollout, run, asynchronous, sft.
"""
