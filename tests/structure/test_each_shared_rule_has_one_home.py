"""One home per shared rule (DESIGN.md): the verdict list, the Lean header and each event payload's
fields are defined once, in ``trainer/``, and imported where they are needed. A second copy drifts
(the run page's JavaScript copy of the verdicts lost ``rejected``)."""

import ast
import re

from tests.structure.source_tree import ROOT, source_files
from trainer.observability.events import PAYLOAD_SCHEMAS
from trainer.recipe.problems import DEFAULT_LEAN_HEADER
from trainer.verification.verdicts import Verdict

VERDICT_HOME = ROOT / "trainer/verification/verdicts.py"
HEADER_HOME = ROOT / "trainer/recipe/problems.py"
EVENTS_HOME = ROOT / "trainer/observability/events.py"
# Verdict values too common to mean a verdict on their own ("valid", "sorry" and "timeout" are English).
DISTINCTIVE_VERDICTS = {Verdict.LEAN_ERROR, Verdict.INFRA_ERROR, Verdict.REJECTED}


def checked_files():
    """Our Python sources and the pages' JavaScript sources (the built bundle is derived from them)."""
    yield from source_files().values()
    yield from sorted((ROOT / "frontend/src").glob("*.js"))


def quoted_strings(path) -> set[str]:
    if path.suffix == ".py":
        return {node.value for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    text = path.read_text()
    # JavaScript: quoted strings, and the bare keys of object literals ({ lean_error: "…" }).
    return set(re.findall(r"""["'`]([^"'`\n]*)["'`]""", text)) | set(re.findall(r"[{,]\s*([a-z_]+)\s*:", text))


def test_the_verdict_list_is_written_once():
    copies = []
    for path in checked_files():
        if path == VERDICT_HOME:
            continue
        named = {str(verdict) for verdict in DISTINCTIVE_VERDICTS} & quoted_strings(path)
        if len(named) >= 2:
            copies.append(f"  {path.relative_to(ROOT)} spells out {sorted(named)}")
    assert not copies, ("the verdicts are trainer/verification/verdicts.py's Verdict (labels included); import "
                        "it, or read its labels from the page's json_script:\n" + "\n".join(copies))


def test_the_lean_header_is_written_once():
    header_lines = [line for line in DEFAULT_LEAN_HEADER.splitlines() if line.strip()]
    copies = []
    for path in checked_files():
        if path == HEADER_HOME:
            continue
        for text in quoted_strings(path):
            if sum(line in text for line in header_lines) >= 3:
                copies.append(f"  {path.relative_to(ROOT)}: {text[:60]!r}…")
    assert not copies, "the Lean header is trainer.recipe.problems.DEFAULT_LEAN_HEADER; import it:\n" + "\n".join(copies)


def test_each_event_payloads_fields_are_declared_once():
    """No class outside trainer/observability/events.py declares a payload's fields again (as the ingester's own
    schemas once did): the ingester validates with the trainer's models."""
    payloads = {model.__name__: set(model.model_fields) for model in PAYLOAD_SCHEMAS.values()}
    copies = []
    for path in source_files().values():
        if path == EVENTS_HOME:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef) or _is_api_schema(node):
                continue
            declared = {item.target.id for item in node.body
                        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
            for name, fields in payloads.items():
                if len(fields) >= 2 and fields <= declared:
                    copies.append(f"  {path.relative_to(ROOT)}: class {node.name} declares {name}'s fields "
                                  f"{sorted(fields)}")
    assert not copies, "an event payload's fields live in trainer/observability/events.py (PAYLOAD_SCHEMAS):\n" + "\n".join(copies)


def _is_api_schema(node: ast.ClassDef) -> bool:
    """The API's schemas (django-ninja ``Schema``) describe stored rows to clients: a contract of their own."""
    return any(isinstance(base, ast.Name) and base.id.endswith("Schema") for base in node.bases)


def test_the_platforms_choices_are_the_trainers_enumerations():
    import django

    django.setup()
    from proofs.models import Turn as TurnChoices
    from proofs.models import Verdict as VerdictChoices
    from trainer.verification.verdicts import Turn

    assert VerdictChoices.choices == [(verdict.value, verdict.label) for verdict in Verdict]
    assert TurnChoices.choices == [(turn.value, turn.label) for turn in Turn]
