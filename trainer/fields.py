"""``FIELD=VALUE`` arguments: the one reading of them for the server's and the trainer's terminal doors.

``manage.py launch_run --set`` gives the launch contract's fields (platform/runs/launch_contract.py):
flat names, each given once. ``python -m trainer run --set`` gives config paths
(``SECTION.FIELD=VALUE``). ``manage.py import_promptset --column`` maps a field to a column
(``FIELD=COLUMN``, the column's name as text). Everywhere a value is read as JSON where it parses
(``50``, ``1e-5``, ``["mlflow"]``) and as text otherwise; the launch contract or the config then
checks it. (The ``leanrl`` client never imports this: it installs without the trainer, and reads
its pairs by the types of the server's published schema, leanrl/assignments.py.)

Standard library only: the platform's management commands import it without torch.
"""

from __future__ import annotations

import json
from typing import Any


def split_assignment(pair: str, *, shape: str = "FIELD=VALUE", example: str = "total_steps=50") -> tuple[str, str]:
    """``"name=text"`` → ``("name", "text")``, the name stripped; ValueError names the shape expected."""
    name, separator, raw = pair.partition("=")
    name = name.strip()
    if not separator or not name:
        raise ValueError(f"expected {shape}, got {pair!r}; e.g. {example}")
    return name, raw


def read_value(raw: str) -> Any:
    """JSON where it parses (numbers, booleans, lists), the text itself otherwise."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def parse_assignment(pair: str) -> tuple[str, Any]:
    """``"learning_rate=1e-5"`` → ``("learning_rate", 1e-05)``; ValueError says what to write instead."""
    name, raw = split_assignment(pair)
    if "." in name:
        # The trainer's --set takes config paths; the launch contract's fields have no sections.
        raise ValueError(f"{name!r}: launch fields are flat names, not config paths "
                         "(e.g. learning_rate=1e-5, not optimizer.learning_rate=1e-5)")
    return name, read_value(raw)


def parse_assignments(pairs: list[str]) -> dict[str, Any]:
    """The launch fields of ``FIELD=VALUE`` pairs; ValueError for a malformed pair or a field given twice."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, value = parse_assignment(pair)
        if name in fields:
            raise ValueError(f"{name} is given twice ({name}={json.dumps(fields[name])} and {pair}); give it once")
        fields[name] = value
    return fields


def parse_config_assignments(pairs: list[str]) -> dict:
    """``["optimizer.learning_rate=1e-5"]`` → ``{"optimizer": {"learning_rate": 1e-5}}``: config paths,
    each a section and a field."""
    nested: dict = {}
    for pair in pairs:
        path, separator, raw = pair.partition("=")
        if not separator or "." not in path:
            raise ValueError(f"--set expects SECTION.FIELD=VALUE, got {pair!r}; e.g. --set optimizer.learning_rate=1e-5")
        *sections, name = path.split(".")
        target = nested
        for section in sections:
            target = target.setdefault(section, {})
        target[name] = read_value(raw)
    return nested
