"""Lean verification: the checked code, the integrity rules, the client, and the stand-in server.

Import the modules themselves (``trainer.verification.client`` …): this package imports
nothing, so importing a verdict does not load httpx or kimina-client.
"""
