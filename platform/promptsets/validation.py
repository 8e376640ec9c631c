"""Checks one Lean 4 statement before it may enter a promptset.

Pure Python (no Django, no torch): the upload form, the API, the management commands and
the variants generator all call ``validate_lean_statement``.

What a statement must be: an optional preamble (imports, ``open`` and ``open scoped``, harmless
``set_option``s, ``universe``, comments), then the definitions the statement needs, if any
(``def``, ``noncomputable def``, ``abbrev``, ``inductive``, ``structure``: PutnamBench states some
problems about them), then exactly one ``theorem``, ``lemma`` or ``example`` whose text ends in
``:= by``. A trailing ``sorry`` (and any comment after ``by``) is dropped. The definitions belong
to the statement, not the header: the prompt shows them, the format check requires the answer to
copy them unchanged, and Lean checks the promptset's copy of them, never the answer's.
Nothing may run code: ``#eval``, ``run_cmd``, macros, attributes and the like are refused,
because a promptset's text is sent to a shared Lean server for every rollout.

Lean's surface is read by the one Lean lexer (``trainer/verification/lean_lexer.py``, shared with the
format check, the integrity rules and the stand-in): nested block comments, line comments,
string, raw string and character literals, «names». That is enough to stop comment tricks
(a ``-/`` hidden in a string, a ``theorem`` hidden in a comment, an unclosed ``/-`` that would
swallow the proof).

Why one piece: it reads a statement once, top to bottom (preamble, definitions, declaration), each
part starting where the one before stopped and refusing what the parts before it allow; split, the
order that decides which reason a row is refused for would no longer read in one place.
"""

from __future__ import annotations

import bisect
import functools
import re
from dataclasses import dataclass
from operator import attrgetter
from typing import NoReturn

from trainer.verification import lean_lexer
from trainer.verification.lean_lexer import COMMENT_KINDS, Token, TokenKind

DEFAULT_MAX_STATEMENT_CHARS = 20_000

DECLARATION_KEYWORDS = frozenset({"theorem", "lemma", "example"})
DECLARATION_MODIFIERS = frozenset({"private", "protected"})
PREAMBLE_COMMANDS = frozenset({"import", "open", "set_option", "universe"})
# Definitions a statement may need before its theorem. Each may follow `noncomputable`; none may be
# `partial`, `unsafe`, `private` or carry an attribute, and none may declare an instance (which would
# change how every later term elaborates).
DEFINITION_KEYWORDS = frozenset({"def", "abbrev", "inductive", "structure"})
NONCOMPUTABLE = "noncomputable"
# `noncomputable section` (nameless, never closed: it lasts to the end of the file) lets the definitions
# after it use choice without each saying `noncomputable`; ProofNet's Rudin rows open one.
SECTION = "section"

# Declarations a promptset row may not contain: each is a second command, not a statement.
OTHER_COMMANDS = frozenset({
    "def", "abbrev", "instance", "structure", "inductive", "class", "axiom", "axioms", "opaque",
    "noncomputable", "partial", "mutual", "namespace", "section", "end", "variable", "variables",
    "attribute", "notation", "infix", "infixl", "infixr", "prefix", "postfix", "deriving",
    "export", "omit", "include", "local", "scoped", "protected", "private",
})

# Words that make Lean run code (or leave the file) while elaborating. Refused everywhere,
# even inside the statement's type, where `by` blocks are otherwise harmless.
CODE_RUNNING_WORDS = frozenset({
    "#eval", "#exit", "#print", "#check", "#reduce", "#synth", "#help", "#guard", "#guard_msgs",
    "#lint", "#find", "#simp", "#norm_num", "#conv", "#where", "#time", "#check_failure",
    "#guard_expr", "#compile", "#widget", "#html", "#explode", "#sample", "#test",
    "run_cmd", "run_tac", "run_elab", "run_meta", "by_elab", "eval%", "elab", "elab_rules",
    "macro", "macro_rules", "syntax", "declare_syntax_cat", "initialize", "builtin_initialize",
    "unsafe", "implemented_by", "extern", "simproc", "dsimproc", "native_decide", "decide!",
})

# Options that only tune budgets, linters or printing. Anything else (e.g. `debug.skipKernelTC`,
# which turns off the kernel check) could make an unsound proof pass.
HARMLESS_OPTION_NAMES = frozenset({
    "maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize",
    "autoImplicit", "relaxedAutoImplicit", "exponentiation.threshold",
    # Lets `[h : P]` bind a hypothesis that is not a class (ProofNet's Munkres rows): the elaborator's
    # check of how a binder is written, nothing the kernel relies on.
    "checkBinderAnnotations",
})
HARMLESS_OPTION_PREFIXES = ("linter.", "pp.", "trace.")

# `open scoped Real` opens only Real's scoped notations and instances: ordinary Lean 4, as `open Real`.
OPEN_SCOPED = "scoped"
CLOSING_BRACKET = {"(": ")", "[": "]", "{": "}", "⟨": "⟩", "⦃": "⦄"}
OPENING_BRACKET = {closing: opening for opening, closing in CLOSING_BRACKET.items()}



class StatementRejected(ValueError):
    """A statement that may not enter a promptset; the message says why and what to change."""


@dataclass(frozen=True)
class ValidatedStatement:
    header: str  # the preamble, stripped; may be empty
    formal_statement: str  # the definitions it needs (if any), doc comments, the declaration; ends in ':= by'
    declaration_kind: str  # theorem, lemma or example
    theorem_name: str  # empty for an example


class _HeaderAndStatement(str):
    """A header column and the statement below it, as one text to read, whose positions in messages name
    the column and count its own lines: the person fixes the row they wrote, not our joined text. A ``str``,
    so that every reader here takes it as the text; slices of it are plain text."""

    statement_offset: int

    def __new__(cls, header: str, formal_statement: str) -> "_HeaderAndStatement":
        joined = super().__new__(cls, f"{header.rstrip()}\n{formal_statement}")
        joined.statement_offset = len(joined) - len(formal_statement)
        return joined


def _position(text: str, offset: int) -> str:
    """``line L, column C`` of ``offset`` in what the user wrote (naming the column where there are two)."""
    if not isinstance(text, _HeaderAndStatement):
        return lean_lexer.position(text, offset)
    if offset < text.statement_offset:
        return f"{lean_lexer.position(text, offset)} of the header"
    statement = text[text.statement_offset:]
    return f"{lean_lexer.position(statement, offset - text.statement_offset)} of the formal statement"


_token_end = attrgetter("end")


def scan(text: str, *, start: int = 0) -> list[Token]:
    """Tokens of ``text`` (from ``start`` on) as the one Lean lexer reads them (``trainer.verification.lean_lexer``);
    raises StatementRejected on an unclosed comment, string or «name», an interpolated string, or a
    ``-/`` that closes nothing."""
    try:
        tokens = lean_lexer.scan(text, strict=True, start=start)
        lean_lexer.refuse_unopened_comment_close(text, tokens)
    except lean_lexer.LexError as error:
        raise StatementRejected(str(error)) from None
    return tokens


def _is_harmless_option(name: str) -> bool:
    return name in HARMLESS_OPTION_NAMES or name.startswith(HARMLESS_OPTION_PREFIXES)


def _check_option(text: str, name_token: Token | None, value_token: Token | None) -> None:
    if name_token is None or name_token.kind != "word" or value_token is None:
        raise StatementRejected(
            "'set_option' needs an option name and a value, e.g. 'set_option maxHeartbeats 400000'"
        )
    if not _is_harmless_option(name_token.text):
        allowed = ", ".join(sorted(HARMLESS_OPTION_NAMES)) + ", linter.*, pp.*, trace.*"
        raise StatementRejected(
            f"'set_option {name_token.text}' at {_position(text, name_token.start)} is not allowed "
            f"(only options that tune budgets, linters or printing: {allowed}): remove it"
        )
    if value_token.kind not in ("word", "number", "string") or value_token.text in PREAMBLE_COMMANDS:
        raise StatementRejected(
            f"'set_option {name_token.text}' at {_position(text, name_token.start)} has no value "
            f"(got {value_token.text!r}): give one, e.g. 'set_option {name_token.text} 400000'"
        )


def _starts_declaration(token: Token) -> bool:
    return token.kind == "word" and (token.text in DECLARATION_KEYWORDS or token.text in DECLARATION_MODIFIERS) \
        or token.text == "@["


def _starts_definition(code: list[Token], index: int) -> bool:
    token = code[index]
    if token.kind is not TokenKind.WORD:
        return False
    if token.text == NONCOMPUTABLE:
        following = code[index + 1] if index + 1 < len(code) else None
        return following is not None and following.kind is TokenKind.WORD and following.text in DEFINITION_KEYWORDS
    return token.text in DEFINITION_KEYWORDS


# Lean reads a command keyword as the start of the next command wherever it stands, so a definition's
# text runs to the first of these; what they start is then checked as any command is.
_WORDS_THAT_END_A_DEFINITION = (
    DECLARATION_KEYWORDS | DECLARATION_MODIFIERS | DEFINITION_KEYWORDS | PREAMBLE_COMMANDS | OTHER_COMMANDS
    | CODE_RUNNING_WORDS
)


def _read_definition(text: str, code: list[Token], index: int) -> int:
    """Index in ``code`` just past the definition that starts at ``index``, after checking it."""
    keyword_index = index + 1 if code[index].text == NONCOMPUTABLE else index
    keyword = code[keyword_index]
    name = code[keyword_index + 1] if keyword_index + 1 < len(code) else None
    if name is None or name.kind is not TokenKind.WORD or name.text in _WORDS_THAT_END_A_DEFINITION:
        raise StatementRejected(
            f"'{keyword.text}' at {_position(text, keyword.start)} has no name: write e.g. "
            f"'{keyword.text} my_function (n : ℕ) : ℕ := n + 1'"
        )
    position = keyword_index + 2
    while position < len(code):
        token = code[position]
        if token.text == "@[" or token.kind is TokenKind.WORD and token.text in _WORDS_THAT_END_A_DEFINITION:
            break
        if token.kind is TokenKind.WORD and token.text == "sorry":
            raise StatementRejected(
                f"'sorry' at {_position(text, token.start)} inside the definition '{name.text}': the theorem would "
                "be about an unfinished value; define it completely"
            )
        position += 1
    return position


def _read_preamble(text: str, code: list[Token]) -> tuple[int, int]:
    """Indices in ``code`` of the statement's first token (its first definition, or else its declaration)
    and of the declaration's first token (``len(code)`` for either if there is none), after checking every
    preamble command and definition."""
    index = 0
    seen_other_command = False
    first_definition: int | None = None
    while index < len(code):
        token = code[index]
        if _starts_declaration(token):
            return (index if first_definition is None else first_definition), index
        if token.kind == "word" and token.text == "import":
            if seen_other_command:
                raise StatementRejected(
                    f"'import' at {_position(text, token.start)} comes after another command; "
                    "Lean only accepts imports at the very top: move it up"
                )
            module = code[index + 1] if index + 1 < len(code) else None
            if module is None or module.kind != "word" or module.text in PREAMBLE_COMMANDS | DECLARATION_KEYWORDS:
                raise StatementRejected(f"'import' at {_position(text, token.start)} names no module, e.g. 'import Mathlib'")
            index += 2
            continue
        seen_other_command = True
        if _starts_definition(code, index):
            first_definition = index if first_definition is None else first_definition
            index = _read_definition(text, code, index)
            continue
        if token.kind == "word" and token.text == NONCOMPUTABLE and index + 1 < len(code) \
                and code[index + 1].kind == "word" and code[index + 1].text == SECTION:
            index += 2
            continue
        if token.kind == "word" and token.text == "set_option":
            name = code[index + 1] if index + 1 < len(code) else None
            value = code[index + 2] if index + 2 < len(code) else None
            _check_option(text, name, value)
            index += 3
            continue
        if token.kind == "word" and token.text in ("open", "universe"):
            index += 1
            if token.text == "open" and index < len(code) and code[index].kind == "word" \
                    and code[index].text == OPEN_SCOPED:
                index += 1
            arguments = 0
            while index < len(code) and not (
                code[index].kind == "word"
                and (code[index].text in PREAMBLE_COMMANDS or _starts_declaration(code[index])
                     or code[index].text in OTHER_COMMANDS or code[index].text in CODE_RUNNING_WORDS)
            ) and code[index].text != "@[":
                argument = code[index]
                if argument.kind == "word" and argument.text == "in":
                    raise StatementRejected(
                        f"'{token.text} … in' at {_position(text, token.start)} is not allowed in the preamble: "
                        f"write '{token.text}' on a line of its own"
                    )
                if token.text == "universe" and argument.kind != "word":
                    raise StatementRejected(
                        f"'universe' at {_position(text, token.start)} takes universe names, got {argument.text!r}"
                    )
                if argument.kind not in ("word", "symbol") or (
                    argument.kind == "symbol" and argument.text not in "()→"
                ):
                    raise StatementRejected(
                        f"unexpected {argument.text!r} after '{token.text}' at {_position(text, argument.start)}: "
                        f"'{token.text}' takes names only"
                    )
                arguments += 1
                index += 1
            if not arguments:
                raise StatementRejected(
                    f"'{token.text}' at {_position(text, token.start)} names nothing, e.g. 'open Real'"
                )
            continue
        if token.kind == "word" and token.text in CODE_RUNNING_WORDS:
            raise StatementRejected(
                f"'{token.text}' at {_position(text, token.start)} runs code while Lean reads the file; "
                "a promptset row may not contain it: remove it"
            )
        if token.kind == "word" and token.text in OTHER_COMMANDS:
            raise StatementRejected(
                f"'{token.text}' at {_position(text, token.start)} is not allowed before the statement; the preamble "
                "may hold only import, open, universe, harmless set_option lines, 'noncomputable section' and "
                "comments, and then the definitions the statement needs (def, noncomputable def, abbrev, inductive, "
                "structure): remove it"
            )
        raise StatementRejected(
            f"unexpected {token.text!r} at {_position(text, token.start)} before the statement; expected "
            "import, open, set_option, a definition, or a theorem, lemma or example"
        )
    return (len(code) if first_definition is None else first_definition), len(code)


# Where a declaration (or its doc comment, modifiers or attributes) may begin a line: what lies above
# is the row's preamble, which most promptsets repeat on every row. What opens a doc comment is the
# lexer's to say.
_DECLARATION_LINE = re.compile(
    rf"^(?:theorem|lemma|example|private|protected|@\[|{re.escape(lean_lexer.DOC_COMMENT_OPENER)})", re.MULTILINE,
)


@functools.lru_cache(maxsize=64)
def _checked_preamble(preamble: str) -> tuple[list[Token], list[Token]] | None:
    """The tokens and code tokens of ``preamble`` (text that ends in a line break), read once however many
    rows repeat it; None where it does not scan, or its commands do not all read, on their own, or it holds a
    definition (which is the statement's, not the preamble's)."""
    try:
        tokens = scan(preamble)
        code = [token for token in tokens if token.kind not in COMMENT_KINDS]
        if _read_preamble(preamble, code) != (len(code), len(code)):
            return None
    except StatementRejected:
        return None
    return tokens, code


def _tokens_and_declaration_start(text: str) -> tuple[list[Token], list[Token], int, int]:
    """All tokens of ``text``, its code tokens (comments left out), and the indices in those of the
    statement's first token (its first definition, or else its declaration) and of the declaration's
    first token, every preamble command and definition checked on the way.

    A preamble seen before is not read again: text up to a line where a declaration may begin is
    looked up (``_checked_preamble``), and only the rest is scanned. That is the same reading as the
    whole text's, since a prefix that scans on its own closes all it opens, and its commands stop
    where a declaration starts, which is checked of the rest's first code token. Any other case
    (no such line, a preamble that does not read on its own) reads the whole text.
    """
    cut = _DECLARATION_LINE.search(text)
    known = _checked_preamble(text[:cut.start()]) if cut is not None and cut.start() else None
    if known is not None:
        rest = scan(text, start=cut.start())
        rest_code = [token for token in rest if token.kind not in COMMENT_KINDS]
        if rest_code and _starts_declaration(rest_code[0]):
            preamble_tokens, preamble_code = known
            return preamble_tokens + rest, preamble_code + rest_code, len(preamble_code), len(preamble_code)
    return _read_whole(text)


def _read_whole(text: str) -> tuple[list[Token], list[Token], int, int]:
    tokens = scan(text)
    code = [token for token in tokens if token.kind not in COMMENT_KINDS]
    return tokens, code, *_read_preamble(text, code)


# The words of a declaration's body that need a second look: each is refused there, except a
# set_option (its option is checked) and local/scoped (harmless inside a term).
_WORDS_TO_CHECK_IN_BODY = CODE_RUNNING_WORDS | DECLARATION_KEYWORDS | OTHER_COMMANDS | {"import", "sorry", "set_option"}


def _check_body_word(text: str, body: list[Token], position: int) -> None:
    token = body[position]
    if token.text in CODE_RUNNING_WORDS:
        raise StatementRejected(
            f"'{token.text}' at {_position(text, token.start)} runs code while Lean reads the file; "
            "a promptset row may not contain it: remove it"
        )
    if token.text in DECLARATION_KEYWORDS or token.text == "import" or (
        token.text in OTHER_COMMANDS and token.text not in ("local", "scoped")
    ):
        raise StatementRejected(
            f"a second command '{token.text}' at {_position(text, token.start)}: a row holds exactly one "
            "theorem, lemma or example; split it into separate rows"
        )
    if token.text == "sorry":
        raise StatementRejected(
            f"'sorry' at {_position(text, token.start)} inside the statement: only a trailing "
            "'sorry' after ':= by' is dropped; state the goal completely"
        )
    if token.text == "set_option":
        _check_option(text, body[position + 1] if position + 1 < len(body) else None,
                      body[position + 2] if position + 2 < len(body) else None)


def _check_declaration_body(text: str, body: list[Token]) -> None:
    """The declaration before its ':= by' (``body[0]`` is the keyword): no word that runs code or starts
    another command, no 'sorry', only harmless options; brackets that close in order; a ':' outside
    every bracket (the goal). One pass; a refused word is reported before a bracket, and a bracket
    before a missing goal."""
    open_brackets: list[Token] = []
    misplaced_closing: Token | None = None
    depth = 0
    states_goal = False
    for position in range(1, len(body)):
        token = body[position]
        kind = token.kind
        if kind is TokenKind.WORD:
            if token.text in _WORDS_TO_CHECK_IN_BODY:
                _check_body_word(text, body, position)
        elif kind is TokenKind.SYMBOL:
            symbol = token.text
            if symbol in CLOSING_BRACKET:
                depth += 1
                if misplaced_closing is None:
                    open_brackets.append(token)
            elif symbol in OPENING_BRACKET:
                depth -= 1
                if misplaced_closing is None:
                    if open_brackets and open_brackets[-1].text == OPENING_BRACKET[symbol]:
                        open_brackets.pop()
                    else:
                        misplaced_closing = token
            elif symbol == ":" and depth == 0:
                states_goal = True
    if misplaced_closing is not None:
        raise StatementRejected(
            f"{misplaced_closing.text!r} at {_position(text, misplaced_closing.start)} closes nothing that was "
            "opened: the statement looks truncated or mistyped"
        )
    if open_brackets:
        token = open_brackets[-1]
        raise StatementRejected(
            f"{token.text!r} opened at {_position(text, token.start)} is never closed with "
            f"{CLOSING_BRACKET[token.text]!r}: the statement looks truncated"
        )
    if not states_goal:
        keyword = body[0]
        raise StatementRejected(
            f"the {keyword.text} states no goal (no ':' before ':= by'): write it as "
            f"'{keyword.text}{' name' if keyword.text != 'example' else ''} (hypotheses) : goal := by'"
        )


def _refuse_ending(text: str, ending: list[Token], has_trailing_sorry: bool) -> NoReturn:
    """Why a declaration whose tokens (a trailing 'sorry' left out) are ``ending`` does not end in ':= by'."""
    last_assignment = max((i for i, token in enumerate(ending) if token.text == ":="), default=None)
    if last_assignment is None:
        raise StatementRejected(
            "the statement does not end in ':= by': add ':= by' after the goal (no proof is needed)"
        )
    after = ending[last_assignment + 1:]
    if not after and has_trailing_sorry:
        raise StatementRejected("the statement ends in ':= sorry' (term mode): end it in ':= by'")
    if not after:
        raise StatementRejected("the statement ends in ':=' without 'by': end it in ':= by'")
    if after[0].text == "by":
        shown = text[after[1].start:ending[-1].end]
        shown = shown if len(shown) <= 60 else shown[:57] + "…"
        raise StatementRejected(
            f"a proof follows ':= by' at {_position(text, after[1].start)} ({shown!r}); a promptset holds "
            "statements only: end it in ':= by'"
        )
    raise StatementRejected(
        f"the statement does not end in ':= by' (a term proof follows ':=' at "
        f"{_position(text, ending[last_assignment].start)}): end it in ':= by'"
    )


def validate_lean_statement(
    formal_statement: str, *, header: str = "", max_chars: int = DEFAULT_MAX_STATEMENT_CHARS
) -> ValidatedStatement:
    """The statement split into preamble and the rest (definitions, if any, and the declaration), or
    StatementRejected saying why not.

    ``header`` is a separate preamble column (miniF2F's and ProofNet's DeepSeek layout); it is read as if
    it stood above the statement, but only where the statement does not begin with imports of its own
    (ProofNet's rows carry their header in both columns: reading it twice would put imports after other
    commands). Positions in messages are of what the user wrote: lines of the statement, or of the
    header column, named as such.
    """
    if not isinstance(formal_statement, str) or not formal_statement.strip():
        raise StatementRejected("the formal statement is empty: give a theorem ending in ':= by'")
    is_header_read = bool(header.strip()) and not _begins_with_import(formal_statement)
    length = len(formal_statement) + (len(header) if is_header_read else 0)
    if length > max_chars:
        raise StatementRejected(
            f"the statement is {length:,} characters long; the limit is {max_chars:,}: shorten it or raise the limit"
        )
    for field_name, value in (("formal statement", formal_statement), ("header", header)):
        if "\x00" in value:
            raise StatementRejected(f"the {field_name} contains a NUL character (offset {value.index(chr(0))}): remove it")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as error:
            raise StatementRejected(
                f"the {field_name} is not valid UTF-8 (undecodable bytes near offset {error.start}): "
                "re-save the file as UTF-8"
            ) from None

    text = _HeaderAndStatement(header, formal_statement) if is_header_read else formal_statement
    tokens, code, statement_first, first = _tokens_and_declaration_start(text)
    if first == len(code):
        raise StatementRejected(
            "no theorem, lemma or example found (comments do not count): "
            "the row must state one, e.g. 'theorem two_add_two : 2 + 2 = 4 := by'"
        )

    keyword_index = first
    while keyword_index < len(code) and not (
        code[keyword_index].kind is TokenKind.WORD and code[keyword_index].text in DECLARATION_KEYWORDS
    ):
        leading = code[keyword_index]
        if leading.text == "@[":
            raise StatementRejected(
                f"an attribute '@[…]' at {_position(text, leading.start)}: attributes can run code while Lean "
                "reads the file; remove it"
            )
        if leading.text not in DECLARATION_MODIFIERS:
            raise StatementRejected(
                f"unexpected {leading.text!r} at {_position(text, leading.start)} before the declaration keyword; "
                "expected theorem, lemma or example"
            )
        keyword_index += 1
    if keyword_index == len(code):
        raise StatementRejected("no theorem, lemma or example follows the modifiers: add the declaration")
    keyword = code[keyword_index]
    declaration_tokens = code[keyword_index:]

    theorem_name = ""
    if keyword.text != "example":
        name_token = declaration_tokens[1] if len(declaration_tokens) > 1 else None
        if name_token is None or name_token.kind != "word":
            raise StatementRejected(
                f"'{keyword.text}' at {_position(text, keyword.start)} has no name: write e.g. "
                f"'{keyword.text} my_result : … := by'"
            )
        theorem_name = name_token.text

    # The end: ':= by', optionally followed by one 'sorry' (dropped). Comments after it are dropped too.
    end = len(declaration_tokens)
    has_trailing_sorry = declaration_tokens[-1].kind == "word" and declaration_tokens[-1].text == "sorry"
    if has_trailing_sorry:
        end -= 1
    if not (end >= 2 and declaration_tokens[end - 2].text == ":=" and declaration_tokens[end - 1].text == "by"):
        _refuse_ending(text, declaration_tokens[:end], has_trailing_sorry)
    by_token = declaration_tokens[end - 1]
    _check_declaration_body(text, declaration_tokens[:end - 1])

    # A doc comment directly above the statement (its first definition, or the declaration's modifiers) belongs to it.
    statement_start = code[statement_first].start
    above = bisect.bisect_right(tokens, statement_start, key=_token_end) - 1
    if above >= 0 and tokens[above].kind == "doc_comment" and not text[tokens[above].end:statement_start].strip():
        statement_start = tokens[above].start

    return ValidatedStatement(
        header=text[:statement_start].strip(),
        formal_statement=text[statement_start:by_token.end],
        declaration_kind=keyword.text,
        theorem_name=theorem_name,
    )


def _begins_with_import(formal_statement: str) -> bool:
    """Whether the statement's first command (comments aside) is an import: then it carries its own header."""
    text = formal_statement.lstrip()
    if not text.startswith(("--", "/-")):
        # The first token starts the text, and its first run of non-blank characters tells whether it is the word
        # `import` (no word holds a blank): the whole statement is scanned once, later, not twice.
        text = text.split(None, 1)[0]
    for token in lean_lexer.scan(text, strict=False):
        if token.kind not in COMMENT_KINDS:
            return token.kind is TokenKind.WORD and token.text == "import"
    return False


def informal_from_doc_comment(text: str) -> str:
    """miniF2F's `informal_prefix` is a Lean doc comment; the informal statement is its inside. Any other
    text (prose, or a doc comment followed by more) is the informal statement as it stands."""
    inside = lean_lexer.doc_comment_inside(text)
    return text.strip() if inside is None else inside
