"""Lean code as the proof viewer draws it: highlighted tokens per line, and Lean's messages by line.

Tokens travel as JSON ``[css_class, text]`` pairs and the browser builds them with textContent,
so model output never becomes markup. Columns stay as Lean reports them (code points); the browser
converts them to its UTF-16 offsets when it places the markers (frontend/src/_lean.js).
"""

from __future__ import annotations

from pygments.lexers import Lean4Lexer
from pygments.token import STANDARD_TYPES

_LEXER = Lean4Lexer(stripnl=False, ensurenl=False)


# Names and whitespace stay unstyled: merging them keeps a long proof to a few spans per line.
_PLAIN = {"", "w", "n", "x", "err"}


def _css_class(token_type) -> str:
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    css_class = STANDARD_TYPES[token_type]
    return "" if css_class in _PLAIN else css_class


def highlighted_lines(code: str) -> list[list[list[str]]]:
    """One list of ``[css_class, text]`` per line of ``code`` (no newlines inside a token)."""
    lines: list[list[list[str]]] = [[]]
    for token_type, text in _LEXER.get_tokens(code):
        css_class = _css_class(token_type)
        for index, piece in enumerate(text.split("\n")):
            if index:
                lines.append([])
            if not piece:
                continue
            if lines[-1] and lines[-1][-1][0] == css_class:
                lines[-1][-1][1] += piece
            else:
                lines[-1].append([css_class, piece])
    if len(lines) > 1 and not lines[-1] and code.endswith("\n"):
        lines.pop()
    return lines


def code_view(checked_code: str, messages: list[dict], fallback_code: str = "") -> dict:
    """What the browser's Lean renderer needs: tokens per line and each message at its line of the text shown.

    Stored messages are already in lines of the checked code (our header, the canonical statement,
    the model's proof, the axioms query): the trainer's verifier converted them once, from whatever
    numbering its Lean server uses (``trainer.verification.line_numbering``). So the viewer shows
    the checked code and places each message on its line as stored. A rollout never sent to Lean
    (format error) has no checked code and no messages: its own code block is shown instead.
    """
    shown = checked_code or fallback_code
    placed = [
        {
            "severity": message.get("severity", "error"), "text": message.get("text", ""),
            "line": message.get("line") if isinstance(message.get("line"), int) else None,
            "column": message.get("column"),
            "end_line": message.get("end_line") if isinstance(message.get("end_line"), int) else None,
            "end_column": message.get("end_column"),
        }
        for message in messages
    ]
    return {"lines": highlighted_lines(shown), "messages": placed, "is_checked_code": bool(checked_code)}
