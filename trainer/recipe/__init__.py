"""The Kimina-Prover-RL recipe's rules: problems, prompts, the format check, reward, retry prompts, rollouts.
Imports from the trainer: config, verification, observability; observability for the event payload that names a
problem left out (prompt_budget.py).
"""
