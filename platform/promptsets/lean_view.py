"""Lean code as the pages draw it: highlighted tokens per line, and Lean's messages by line.

A problem's statement (its page) and a proof attempt's code (the proof viewer) are drawn alike; this
lives in the lowest app that draws Lean, so the apps above import it (promptsets ← runs ← proofs).

Tokens travel as JSON ``[css_class, text]`` pairs and the browser builds them with textContent,
so model output never becomes markup. Columns stay as Lean reports them (code points); the browser
converts them to its UTF-16 offsets when it places the markers (frontend/src/_lean.js).
"""

from __future__ import annotations

from django.utils.html import escape

from trainer.verification import lean_lexer
from trainer.verification.lean_lexer import TokenKind

# Words drawn as keywords: the commands that open a declaration or shape a file, and the words that
# structure a term or a proof. Names, tactics and whitespace stay unstyled (a long proof is then a
# few spans per line).
_COMMAND_WORDS = frozenset({
    "import", "open", "namespace", "section", "end", "variable", "universe", "set_option", "theorem", "lemma",
    "example", "def", "abbrev", "instance", "structure", "inductive", "class", "axiom", "noncomputable",
    "private", "protected", "attribute", "macro", "syntax", "#eval", "#print", "#check",
})
_TERM_WORDS = frozenset({
    "by", "fun", "have", "show", "from", "let", "in", "if", "then", "else", "match", "with", "do", "at", "calc",
    "obtain", "suffices", "this", "sorry",
})
_BRACKETS_AND_COLONS = frozenset({"(", ")", "[", "]", "{", "}", "⟨", "⟩", "⦃", "⦄", ":", ":="})


def _css_class(token: lean_lexer.Token) -> str:
    kind = token.kind
    if kind is TokenKind.COMMENT:
        return "c1" if token.text.startswith("--") else "cm"
    if kind is TokenKind.DOC_COMMENT:
        return "sd"
    if kind is TokenKind.STRING:
        return "s2"
    if kind is TokenKind.CHAR:
        return "sc"
    if kind is TokenKind.NUMBER:
        return "mi"
    if kind is TokenKind.WORD:
        return "kn" if token.text in _COMMAND_WORDS else "k" if token.text in _TERM_WORDS else ""
    return "o" if token.text in _BRACKETS_AND_COLONS else ""


def _pieces(code: str):
    """``(css_class, text)`` pieces that add up to ``code``: its tokens as the one Lean lexer reads them
    (trainer.verification.lean_lexer, leniently: an answer may be cut short), the whitespace between them unstyled."""
    cursor = 0
    for token in lean_lexer.scan(code, strict=False):
        if token.start > cursor:
            yield "", code[cursor:token.start]
        yield _css_class(token), token.text
        cursor = token.end
    if cursor < len(code):
        yield "", code[cursor:]


def without_leading_comments(statement: str) -> str:
    """``statement`` from its first piece of code on (``theorem …``): a list of problems shows what is to be
    proved, not the docstring or comment that opens many uploaded statements. The one Lean lexer decides what is
    a comment, so a ``--`` inside a «name» or a string is never taken for one."""
    for token in lean_lexer.scan(statement, strict=False):
        if token.kind not in lean_lexer.COMMENT_KINDS:
            return statement[token.start:]
    return statement


def highlighted_lines(code: str) -> list[list[list[str]]]:
    """One list of ``[css_class, text]`` per line of ``code`` (no newlines inside a token)."""
    lines: list[list[list[str]]] = [[]]
    for css_class, text in _pieces(code):
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


def highlighted_html(code: str) -> str:
    """``code`` as escaped HTML spans of those classes, for a ``<pre class="lean">``: statements and answers are
    untrusted text, so every piece is escaped."""
    return "\n".join(
        "".join(f'<span class="{css_class}">{escape(text)}</span>' if css_class else escape(text) for css_class, text in line)
        for line in highlighted_lines(code)
    )


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
