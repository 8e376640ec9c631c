"""``python -m trainer run --set SECTION.FIELD=VALUE``: config paths, values read as every terminal door reads
them (leanrl/fields.py)."""

from __future__ import annotations

from leanrl.fields import read_value


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
