"""``FIELD=VALUE`` arguments for the launch contract's fields (platform/runs/launch_contract.py).

One rule for every terminal door to a launch, ``leanrl runs launch`` and ``manage.py launch_run
--set``: the fields are flat names, a value is read as JSON where it parses (``50``, ``1e-5``,
``["mlflow"]``) and as text otherwise, and a field is given once. Standard library only: the
``leanrl`` client imports it without Django or the trainer.
"""

from __future__ import annotations

import json
from typing import Any


def parse_assignment(pair: str) -> tuple[str, Any]:
    """``"learning_rate=1e-5"`` → ``("learning_rate", 1e-05)``; ValueError says what to write instead."""
    name, separator, raw = pair.partition("=")
    name = name.strip()
    if not separator or not name:
        raise ValueError(f"expected FIELD=VALUE, got {pair!r}; e.g. total_steps=50")
    if "." in name:
        # The trainer's --set takes config paths; the launch contract's fields have no sections.
        raise ValueError(f"{name!r}: launch fields are flat names, not config paths "
                         "(e.g. learning_rate=1e-5, not optimizer.learning_rate=1e-5)")
    try:
        return name, json.loads(raw)
    except json.JSONDecodeError:
        return name, raw


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """The launch fields of ``FIELD=VALUE`` pairs; ValueError for a malformed pair or a field given twice."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, value = parse_assignment(pair)
        if name in fields:
            raise ValueError(f"{name} is given twice ({name}={json.dumps(fields[name])} and {pair}); give it once")
        fields[name] = value
    return fields
