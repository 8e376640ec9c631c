"""The Kimina-Prover-RL recipe's rules: problems, prompts, the format check, reward, retry prompts, rollouts.
Imports from the trainer: config, verification.
"""
