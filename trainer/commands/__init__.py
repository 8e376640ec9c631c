"""The ``python -m trainer`` commands: one module each, with ``add_arguments(parser)`` and ``main(args)``.
Imports from the trainer: anything; only ``trainer.__main__`` imports it (their shared part: command_line).
"""
