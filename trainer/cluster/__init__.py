"""How a run sits on a Ray cluster: its placement rule (placement.py)."""
