"""``FIELD=VALUE`` arguments of ``leanrl runs launch``, each value typed by the schema the server publishes.

The client never imports the server (it installs alone and speaks HTTP only), so it reads a value by
the type ``/api/openapi.json`` gives its field, not by a copy of the server's rules: ``name=2024`` is the
text "2024" because a name is text, ``total_steps=50`` the integer 50, and ``kind=evaluation`` is refused
with the choices before anything is sent. What a schema cannot say (the bounds of each preset, whether a
model is registered) the server checks, and its refusal is printed as it gave it.

How a value is read, by its field's type:

- integer: a whole number (``50``); number: a number as JSON writes it (``1e-5``, ``0.3``);
- boolean: ``true`` or ``false`` (or yes/no, on/off, 1/0, as the server itself takes them);
- text: as written; with choices (an enumeration), exactly one of them;
- list: items separated by commas (``tracking=mlflow,wandb``) or a JSON list (``tracking='["mlflow"]'``),
  each item read by the list's item type; blank is the empty list;
- object: a JSON object;
- a field that may be null: blank (``model=``) or ``null`` leaves it to the server's default (the preset's);
- a field the schema gives no type: JSON where it parses, text otherwise.
"""

from __future__ import annotations

import json
import math
from typing import Any

# What the server's pydantic takes for a boolean, so the words that worked when the server read them still do.
TRUE_WORDS = frozenset({"true", "t", "yes", "y", "on", "1"})
FALSE_WORDS = frozenset({"false", "f", "no", "n", "off", "0"})


class _Unreadable(ValueError):
    """A value its schema cannot read; the caller names the field and the value."""


def split_assignment(pair: str) -> tuple[str, str]:
    """``"learning_rate=1e-5"`` → ``("learning_rate", "1e-5")``; ValueError says what to write instead."""
    name, separator, raw = pair.partition("=")
    name = name.strip()
    if not separator or not name:
        raise ValueError(f"expected FIELD=VALUE, got {pair!r}; e.g. total_steps=50")
    if "." in name:
        # The trainer's --set takes config paths; the launch contract's fields have no sections.
        raise ValueError(f"{name!r}: launch fields are flat names, not config paths "
                         "(e.g. learning_rate=1e-5, not optimizer.learning_rate=1e-5)")
    return name, raw


def read_assignments(pairs: list[str], fields: dict[str, dict]) -> dict[str, Any]:
    """The request body of ``FIELD=VALUE`` pairs, each value read by its field's schema in ``fields``
    (``PlatformClient.body_fields``); ValueError for a malformed pair, a field given twice, a field the
    server does not take, or a value its field's type cannot read, naming the field and what it takes."""
    given: dict[str, str] = {}
    for pair in pairs:
        name, raw = split_assignment(pair)
        if name in given:
            raise ValueError(f"{name} is given twice ({name}={given[name]} and {pair}); give it once")
        given[name] = raw
    unknown = [name for name in given if name not in fields]
    if unknown:
        raise ValueError(f"unknown launch field(s) {', '.join(unknown)}; the server takes: {', '.join(fields)}")
    return {name: read_value(name, raw, fields[name]) for name, raw in given.items()}


def read_value(name: str, raw: str, schema: dict) -> Any:
    """``raw`` as the value its schema describes; ValueError names the field, the value and what it takes."""
    try:
        return _read(raw, schema)
    except _Unreadable:
        raise ValueError(f"{name} takes {expected(schema)}; got {raw!r}") from None


def expected(schema: dict) -> str:
    """What a field takes, in the words of ``leanrl runs launch --fields`` and of its refusals."""
    alternatives = _alternatives(schema)
    if alternatives is not None:
        others = [alternative for alternative in alternatives if not _is_null(alternative)]
        words = " or ".join(expected(alternative) for alternative in others)
        return f"{words}, or blank for the default" if len(others) < len(alternatives) else words
    choices = _choices(schema)
    if choices is not None:
        return "one of " + ", ".join(str(choice) for choice in choices)
    kind = schema.get("type")
    if kind == "array":
        return f"a list (separated by commas, or as JSON), each item {expected(schema.get('items', {}))}"
    return {"integer": "an integer", "number": "a number", "boolean": "true or false", "string": "text",
            "object": "a JSON object", "null": "blank"}.get(kind, "a JSON value or text")


def _read(raw: str, schema: dict) -> Any:
    alternatives = _alternatives(schema)
    if alternatives is not None:
        if raw.strip() in ("", "null") and any(_is_null(alternative) for alternative in alternatives):
            return None
        # Text last, so that "50" is the number where a field takes a number or text.
        for alternative in sorted(alternatives, key=lambda alternative: alternative.get("type") == "string"):
            if not _is_null(alternative):
                try:
                    return _read(raw, alternative)
                except _Unreadable:
                    continue
        raise _Unreadable
    choices = _choices(schema)
    if choices is not None:
        for choice in choices:
            if raw == choice or (not isinstance(choice, str) and _json_or_none(raw) == choice):
                return choice
        raise _Unreadable
    kind = schema.get("type")
    if kind == "string":
        return raw
    if kind == "boolean":
        word = raw.strip().lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        raise _Unreadable
    if kind == "integer":
        number = _json_or_none(raw)
        if isinstance(number, float) and number.is_integer():
            return int(number)
        if isinstance(number, int) and not isinstance(number, bool):
            return number
        raise _Unreadable
    if kind == "number":
        number = _json_or_none(raw)
        if isinstance(number, int | float) and not isinstance(number, bool) and math.isfinite(number):
            return number
        raise _Unreadable
    if kind == "array":
        return _read_list(raw, schema.get("items", {}))
    if kind == "object":
        value = _json_or_none(raw)
        if isinstance(value, dict):
            return value
        raise _Unreadable
    if kind == "null":
        if raw.strip() in ("", "null"):
            return None
        raise _Unreadable
    value = _json_or_none(raw)
    return raw if value is None and raw.strip() != "null" else value


def _read_list(raw: str, items: dict) -> list:
    text = raw.strip()
    if text.startswith("["):
        values = _json_or_none(text)
        if not isinstance(values, list):
            raise _Unreadable
        # Items already typed by JSON are read again as text, so that each meets the item's type (an enumeration).
        return [_read(value if isinstance(value, str) else json.dumps(value), items) for value in values]
    return [_read(part.strip(), items) for part in text.split(",")] if text else []


def _alternatives(schema: dict) -> list[dict] | None:
    """The schemas of a union (``anyOf``/``oneOf``, or a list of types), or None for a single type."""
    if isinstance(schema.get("type"), list):
        return [{**schema, "type": kind} for kind in schema["type"]]
    return schema.get("anyOf") or schema.get("oneOf")


def _choices(schema: dict) -> list | None:
    if "enum" in schema:
        return list(schema["enum"])
    if "const" in schema:
        return [schema["const"]]
    return None


def _is_null(schema: dict) -> bool:
    return schema.get("type") == "null"


def _json_or_none(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return None
