"""The step-time model: how long a training step takes, and how long the GPUs sit idle, for η = 0, 1, 2.
Imports from the trainer: command_line, verification, node_layout.

``python -m trainer step-time --preset NAME`` (trainer/commands/step_time.py). The simulation is in
``simulation``; the inputs of each preset, each with where it came from, in ``inputs``; the check
against a measured run's events (``--calibrate EVENTS.jsonl``) in ``calibration``. Pure Python: no torch.
"""
