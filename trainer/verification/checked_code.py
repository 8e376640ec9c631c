"""What is sent to Lean: our header, the canonical statement, the model's proof body, an axioms query.

The model's own copy of the statement is never checked: a policy under RL pressure would
weaken it. The code is laid out as

    import …                    the problem's import lines, normalised (identical for every
                                snippet of an environment: the server keys its REPLs on them)
    set_option … / open …       the rest of the problem's header
    theorem NAME … := by        the canonical formal statement
      <proof body>              the model's proof, indented under the statement if it was not
    #print axioms NAME          so Lean itself says which axioms the accepted proof uses

kimina-lean-server strips the leading import (and blank) lines and runs them as the REPL's
environment. Depending on its build, the positions in Lean's messages count lines from the
first line after them or lines of the code as sent (``trainer.verification.line_numbering``
finds out which, per server). ``CheckedCode.lean_line_to_code_line`` is the one place that
turns them into lines of this text; everything downstream (the verdict, the retry prompt, the
stored messages, the proof viewer) uses those lines as they are.
"""

from __future__ import annotations

import re
from typing import Any

from trainer.verification import lean_lexer
from trainer.verification.line_numbering import LineNumbering

AXIOMS_QUERY = "#print axioms"

_DECLARATION = re.compile(
    r"^(?P<prefix>[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:private|protected|nonrec)[ \t]+)*)"
    r"(?P<keyword>theorem|lemma|example)\b(?:[ \t]+(?P<name>[^\s(:{\[⦃]+))?",
    re.MULTILINE,
)
DECLARATION_KEYWORDS = frozenset({"theorem", "lemma", "example"})
# The theorem name given to a statement declared with ``example`` (which has no name to ask
# Lean about): the axioms query needs one.
EXAMPLE_THEOREM_NAME = "checked_statement"


class CheckedCode(str):
    """The checked code (a ``str``), plus where its parts start, to map Lean's positions back.

    Line numbers are 1-based lines of this text.
    """

    import_line_count: int  # leading import/blank lines the server runs as the environment
    statement_line: int  # first line of the canonical statement
    body_line: int  # first line of the model's proof body
    body_column_shift: int  # columns added in front of every body line (0 if none)
    axioms_line: int | None  # the ``#print axioms`` line
    theorem_name: str | None

    def __new__(cls, code: str, **layout: Any) -> "CheckedCode":
        instance = super().__new__(cls, code)
        defaults = layout_of(code) if not layout else {}
        for key, value in {**defaults, **layout}.items():
            setattr(instance, key, value)
        return instance

    def lean_line_to_code_line(self, lean_line: int | None, numbering: LineNumbering) -> int | None:
        """Lean's line, as the server numbered it, as a line of this text."""
        if lean_line is None:
            return None
        return lean_line + self.import_line_count if numbering is LineNumbering.AFTER_HEADER else lean_line


def leading_import_line_count(code: str) -> int:
    """How many leading lines kimina-lean-server strips as the import header (imports and blanks)."""
    count = 0
    for line in code.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("import "):
            break
        count += 1
    return count


def layout_of(code: str) -> dict[str, Any]:
    """The layout of a checked code read back from its text (for codes that arrive as plain ``str``)."""
    lines = code.splitlines()
    axioms_line = None
    theorem_name = None
    for number in range(len(lines), 0, -1):
        stripped = lines[number - 1].strip()
        if not stripped:
            continue
        if stripped.startswith(AXIOMS_QUERY + " "):
            axioms_line = number
            theorem_name = stripped[len(AXIOMS_QUERY) :].strip()
        break
    statement = _DECLARATION.search(code)
    statement_line = code.count("\n", 0, statement.start()) + 1 if statement else 1
    return {
        "import_line_count": leading_import_line_count(code),
        "statement_line": statement_line,
        "body_line": statement_line,
        "body_column_shift": 0,
        "axioms_line": axioms_line,
        "theorem_name": theorem_name,
    }


def normalised_header(header: str) -> str:
    """Import lines first (stripped, without duplicates, in order), then the other header lines.

    Every snippet of one environment then starts with byte-identical import lines: the
    server reuses a REPL only for the same textual header, so any difference would leak
    or waste environments.
    """
    imports: list[str] = []
    rest: list[str] = []
    for line in header.splitlines():
        stripped = line.strip()
        if stripped.startswith("import "):
            if stripped not in imports:
                imports.append(stripped)
        else:
            rest.append(line.rstrip())
    while rest and not rest[0].strip():
        rest.pop(0)
    while rest and not rest[-1].strip():
        rest.pop()
    parts = ["\n".join(imports)] if imports else []
    if rest:
        parts.append("\n".join(rest))
    return "\n\n".join(parts)


def canonical_statement(formal_statement: str) -> tuple[str, str]:
    """The statement with a nameable theorem, and that name.

    Raises ValueError when the statement declares no theorem at all: such a problem
    cannot be checked and should have been rejected when the promptset was loaded.
    """
    statement = formal_statement.strip("\n").rstrip()
    declaration = _declaration(statement)
    if declaration is None:
        raise ValueError(
            f"formal statement {formal_statement[:80]!r} declares no theorem, lemma or example; "
            "give the problem a statement such as 'theorem name : … := by'"
        )
    keyword, name = declaration
    if not re.search(r":=\s*(by)?$", statement):
        # A bare statement: the model's body is a tactic proof, as in the recipe's prompts.
        statement += " := by"
    if keyword.text == "example":
        statement = statement[: keyword.start] + f"theorem {EXAMPLE_THEOREM_NAME}" + statement[keyword.end :]
        return statement, EXAMPLE_THEOREM_NAME
    if name is None or name.kind is not lean_lexer.TokenKind.WORD:
        raise ValueError(f"formal statement {formal_statement[:80]!r} has a {keyword.text} without a name")
    return statement, name.text


def _declaration(statement: str) -> tuple[lean_lexer.Token, lean_lexer.Token | None] | None:
    """The statement's declaration keyword and the code token after it, as Lean reads them. A statement may begin
    with definitions and doc comments (PutnamBench's), and a line of those that starts with 'example' or 'theorem'
    is not the declaration: taking it for one would rename the wrong text and ask Lean about the wrong theorem."""
    code = [token for token in lean_lexer.scan(statement, strict=False) if token.kind not in lean_lexer.COMMENT_KINDS]
    for index, token in enumerate(code):
        if token.kind is lean_lexer.TokenKind.WORD and token.text in DECLARATION_KEYWORDS:
            return token, code[index + 1] if index + 1 < len(code) else None
    return None


def _indented_body(proof_body: str) -> tuple[list[str], int]:
    lines = proof_body.strip("\n").split("\n") if proof_body.strip() else []
    lines = [line.rstrip() for line in lines]
    indents = [len(line) - len(line.lstrip(" \t")) for line in lines if line.strip()]
    # A tactic block at column 0 would end the declaration: Lean wants it indented.
    shift = 2 if indents and min(indents) == 0 else 0
    return [(" " * shift + line) if line else line for line in lines], shift


def build_checked_code(problem: Any, proof_body: str) -> CheckedCode:
    """Header, canonical statement, the model's proof body, and the axioms query, as one text.

    ``problem`` needs ``header`` and ``formal_statement`` (``trainer.recipe.problems.Problem``).
    """
    header = normalised_header(getattr(problem, "header", "") or "")
    statement, theorem_name = canonical_statement(problem.formal_statement)
    body_lines, shift = _indented_body(proof_body)

    head = header + "\n\n" if header else ""
    statement_line = head.count("\n") + 1
    body_line = statement_line + statement.count("\n") + 1
    text = head + statement + "\n" + "\n".join(body_lines) + "\n\n"
    axioms_line = text.count("\n") + 1
    text += f"{AXIOMS_QUERY} {theorem_name}\n"
    return CheckedCode(
        text,
        import_line_count=leading_import_line_count(text),
        statement_line=statement_line,
        body_line=body_line,
        body_column_shift=shift,
        axioms_line=axioms_line,
        theorem_name=theorem_name,
    )
