"""MkDocs hook: the configuration page's tables, written from the trainer's schema at build time.

Every field's meaning, unit and default has one home, ``trainer/config.py`` (``RunConfig``, its
sections and ``PRESETS``); this hook renders them where the page says
``<!-- configuration: generated -->``, so the docs cannot drift from the schema. It imports the
trainer's config module alone (pydantic), never Django.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # MkDocs loads this file by its path: the trainer is found from the repository's root
    sys.path.insert(0, str(REPO))

from trainer.config import PRESETS, RunConfig  # noqa: E402 - after the repository's root is on sys.path, above

MARKER = "<!-- configuration: generated -->"
PAGE = "reference/configuration.md"


def _cell(text: str) -> str:
    """Markdown table cell text: HTML escaped (descriptions quote <think> and <lean>), pipes kept in the cell."""
    return html.escape(text, quote=False).replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    if value is None:
        return "`null`"
    return f"`{json.dumps(value, ensure_ascii=False)}`"


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if isinstance(annotation, type) else None
    text = text or str(annotation).replace("typing.", "").replace("trainer.config.", "")
    return text.replace("pydantic.types.", "")


def configuration_tables() -> str:
    """One table per section of RunConfig: field, type, each preset's value, the field's description."""
    presets = list(PRESETS)
    resolved = {name: RunConfig.from_preset(name).to_json_dict() for name in presets}
    out: list[str] = []
    for section, info in RunConfig.model_fields.items():
        model = info.annotation
        if not isinstance(model, type) or not hasattr(model, "model_fields"):
            continue
        out.append(f"## `{section}`\n")
        doc = (model.__doc__ or "").strip()
        if doc and not doc.startswith(("A base class", "Usage docs")):
            out.append(_cell(" ".join(doc.split())) + "\n")
        out.append("| field | type | " + " | ".join(f"`{name}`" for name in presets) + " | meaning |")
        out.append("| --- | --- | " + " | ".join("---" for _ in presets) + " | --- |")
        for field, field_info in model.model_fields.items():
            values = " | ".join(_value(resolved[name][section][field]) for name in presets)
            description = _cell(field_info.description or "")
            out.append(f"| `{section}.{field}` | {_cell(_type_name(field_info.annotation))} | {values} | {description} |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER!r}: the generated tables have nowhere to go")
    return markdown.replace(MARKER, configuration_tables())
