"""What every kind of run shares: its life from start to its one end, its checkpoints, and their export to the Hub.
Imports from the trainer: config, command_line, cluster, verification, observability, recipe.
"""
