"""How a run sits on a Ray cluster: its placement rule and which failures are the infrastructure's.
Imports from the trainer: config, staleness.
"""
