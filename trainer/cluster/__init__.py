"""How a run sits on a Ray cluster: its placement rule (placement.py) and which failures are the infrastructure's
(failures.py), pure rules that the driver (trainer/loop/ray_driver.py), the rank code and the platform read.
Imports from the trainer: config, staleness.
"""
