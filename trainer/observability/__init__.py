"""What a run tells: typed events, live answers, progress, trackers, Ray metrics, token records, the gap.
Imports from the trainer: config, verification.

The events and the token records are read by the platform without torch: this package imports nothing.
"""
