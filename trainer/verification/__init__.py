"""Lean verification: the one Lean lexer, the checked code, the integrity rules, the client, the stand-in server.
Imports from the trainer: nothing outside this folder.

Import the modules themselves (``trainer.verification.client`` …): this package imports
nothing, so importing a verdict does not load httpx or kimina-client.
"""
