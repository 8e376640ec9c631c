"""The memory plan: one rank's peak GPU memory from the model's shape, whether a run fits, its measured check.
Imports from the trainer: config, compute_dtype, ranks, staleness, learning, asynchronous, node_layout.
"""
