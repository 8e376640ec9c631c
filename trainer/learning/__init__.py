"""The learner's step: the policy's loading, batches, packed attention, log-probabilities, Dr.GRPO, FSDP.
Imports from the trainer: config, compute_dtype, observability.
"""
