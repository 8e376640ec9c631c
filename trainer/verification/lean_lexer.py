"""The one reader of Lean 4's surface: comments, strings, character literals, «names», tokens.

Everything that must tell code from comments or strings reads Lean through this module: the
integrity rules (``trainer/verification/integrity.py``), the stand-in server
(``trainer/verification/standin.py``), promptset validation (``platform/promptsets/validation.py``),
the format check's comment handling (``trainer/recipe/format_reward.py``) and the highlighting of the proof
viewer and the problem page (``platform/promptsets/lean_view.py``). It is a security
boundary: if two of them read a ``-/`` differently, a proof can hide code from one check inside
what another takes for a comment. So there is exactly one reading, and it is Lean's:

* ``--`` starts a comment that runs to the end of the line;
* ``/-`` starts a block comment, and block comments nest (``/- a /- b -/ c -/`` is one comment);
  ``/--`` starts a doc comment; as in Lean, the character after the opening ``/-`` is never the
  start of a delimiter (``/--/`` is an open doc comment, ``/-/- -/`` one closed comment);
* ``"…"`` is a string with backslash escapes; it may span lines;
* ``r"…"`` and ``r#"…"#`` are raw strings: no escapes, they end at ``"`` followed by as many ``#``;
* ``'x'``, ``'\\n'``, ``'\\x41'``, ``'\\u03B1'`` are character literals, but only where a token
  starts: the ``'`` of ``h'`` belongs to the identifier;
* ``«…»`` quotes a name that may contain anything, ``--`` included.

One other reading lives here, and it is not Lean's: ``CommentRule.KIMINA_RELEASE``, the
Kimina-Prover-RL release's comment rule, which ``strip_comments`` applies on request. The
release's format checker removes comments that way, and our default format reward must give the
release's verdict on every answer, so the default format check (``trainer/recipe/format_reward.py``)
uses it. It decides format verdicts only; nothing that decides what Lean runs or what integrity
allows reads it.

What this reader cannot follow it refuses rather than guesses (``strict=True``): an unterminated
comment, string or «name», and interpolated strings (``s!"…{…}…"``), whose braces hold code.
With ``strict=False`` an unterminated construct runs to the end of the text, which is what the
format check's statistics want from untrusted, possibly truncated answers.

Properties (lengths and lines kept, code outside comments untouched, nesting, unterminated
constructs) are tested in ``tests/verification/test_lean_lexer_properties.py``; the integrity
attacks in ``tests/verification/test_integrity_attack_table.py``.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple


class TokenKind(StrEnum):
    WORD = "word"  # identifiers and keywords, «quoted» names included
    NUMBER = "number"
    SYMBOL = "symbol"
    STRING = "string"
    CHAR = "char"
    COMMENT = "comment"
    DOC_COMMENT = "doc_comment"


COMMENT_KINDS = frozenset({TokenKind.COMMENT, TokenKind.DOC_COMMENT})


class CommentRule(StrEnum):
    """Whose reading of comments ``strip_comments`` follows."""

    LEAN = "lean"  # Lean 4's, as ``scan`` reads it: the one every security decision uses
    KIMINA_RELEASE = "kimina_release"  # the release's format checker's, not Lean's (end of this module)


class Token(NamedTuple):  # a tuple, not a dataclass: scan makes ~60 a statement, and this is 3x cheaper to build
    kind: TokenKind
    text: str
    start: int
    end: int


class LexError(ValueError):
    """Text this reader cannot read the way Lean would; ``offset`` is where the construct starts."""

    def __init__(self, message: str, offset: int, *, is_unclosed_comment: bool = False):
        super().__init__(message)
        self.offset = offset
        self.is_unclosed_comment = is_unclosed_comment


def position(text: str, offset: int) -> str:
    """``line L, column C`` (both 1-based) of ``offset`` in ``text``, for messages."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}"


# Dots join the parts of a name; a trailing dot ends a sentence, not a name, so it is left out.
_WORD = re.compile(r"eval%|#?[^\W\d](?:[\w'!?]|\.+(?=[\w'!?]))*")
# Lean's numerals: decimal, scientific, 0x/0b/0o. A letter right after a numeral starts a new
# token (``2set_option`` is ``2`` then ``set_option``), as in Lean.
_NUMBER = re.compile(r"0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?")
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)|[^\\'\n])'")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_COMMENT_DELIMITER = re.compile(r"/-|-/")
DOC_COMMENT_OPENER = "/--"  # for a reader that must find where a declaration's doc comment may begin
_TWO_CHARACTER_SYMBOLS = (":=", "@[", "-/")
# Whitespace, then the next token, in one regex: its alternatives are tried in order, so each token
# costs one match instead of a chain of Python tests. Where two alternatives can match at the same
# place, the order is the precedence: a raw string before a word (``r"``), comments, strings,
# «names» and character literals before the symbol that would take their first character. The rest
# are ordered by how common they are (words first), since every failed alternative costs a try.
# The constructs that nest, may be left open or depend on the previous token only open here;
# scan() reads them to their end. The last alternative matches at the end of the text, so a match
# never fails: finditer then reads token after token with no gap (and trailing whitespace costs one
# match, not one search per character).
_TOKEN_PATTERNS = (
    # ``r"`` opens a raw string only where ``r`` starts a token, not at the end of ``bar"``
    # (``\w`` is exactly ``str.isalnum()`` or ``_``).
    ("raw_string", r"(?<![\w'!?.])r#*\""),
    ("word", _WORD.pattern),
    ("number", _NUMBER.pattern),
    ("line_comment", r"--[^\n]*"),
    ("block_comment", r"/-"),
    ("string", '"'),
    ("quoted_name", "«"),
    ("char", _CHAR.pattern),
    ("symbol", "|".join(re.escape(symbol) for symbol in _TWO_CHARACTER_SYMBOLS) + "|."),
    ("end_of_text", r"\Z"),
)
_NEXT_TOKEN = re.compile(r"\s*+(?:" + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _TOKEN_PATTERNS) + ")")
_WHOLE_TOKEN_KINDS = {"line_comment": TokenKind.COMMENT, "char": TokenKind.CHAR, "word": TokenKind.WORD,
                      "number": TokenKind.NUMBER, "symbol": TokenKind.SYMBOL}
# By group number (the patterns themselves capture nothing, so group i is alternative i): a list
# index per token is cheaper than looking a group up by name.
_GROUP_NAMES = (None, *(name for name, _ in _TOKEN_PATTERNS))
_WHOLE_TOKEN_KIND_BY_GROUP = tuple(_WHOLE_TOKEN_KINDS.get(name) for name in _GROUP_NAMES)
_new_token = tuple.__new__  # Token's own constructor, without NamedTuple's Python-level __new__


def scan(text: str, *, strict: bool = True, start: int = 0) -> list[Token]:
    """The tokens of ``text`` in order (whitespace skipped); ``text[t.start:t.end] == t.text``.

    Raises ``LexError`` (strict) on an unterminated comment, string, raw string or «name», and on
    an interpolated string; without ``strict`` those run to the end of the text (an interpolated
    string is then read as a plain one).

    ``start`` reads from that offset on (offsets and messages stay the whole text's). Where ``start``
    follows a line break and ``text[:start]`` scans without error, ``scan(text[:start])`` followed
    by ``scan(text, start=start)`` are exactly ``scan(text)``: every construct the prefix opens, it
    closes, and no token spans a line break unless a construct does.
    """
    tokens: list[Token] = []
    append = tokens.append
    length = len(text)
    index = start
    while True:
        # The tokens a regex match reads whole, in one tight loop; it stops at a construct read below.
        for match in _NEXT_TOKEN.finditer(text, index):
            group = match.lastindex
            whole_kind = _WHOLE_TOKEN_KIND_BY_GROUP[group]
            if whole_kind is None:
                break
            start, end = match.span(group)
            append(_new_token(Token, (whole_kind, text[start:end], start, end)))
        kind = _GROUP_NAMES[group]
        if kind == "end_of_text":
            return tokens
        start, index = match.span(group)
        if kind == "block_comment":
            index = _block_comment_end(text, start, strict)
            is_doc = text.startswith(DOC_COMMENT_OPENER, start)
            append(Token(TokenKind.DOC_COMMENT if is_doc else TokenKind.COMMENT, text[start:index], start, index))
        elif kind == "string":
            if strict and tokens and tokens[-1].end == start and tokens[-1].kind == TokenKind.WORD \
                    and tokens[-1].text.endswith("!"):
                raise LexError(
                    f"an interpolated string ({tokens[-1].text}\"…\") at {position(text, start)}: the code inside its "
                    "braces is not read here", start,
                )
            index = _string_end(text, start, strict)
            append(Token(TokenKind.STRING, text[start:index], start, index))
        elif kind == "quoted_name":
            end = text.find("»", start + 1)
            if end == -1:
                if strict:
                    raise LexError(f"'«' at {position(text, start)} is never closed: add '»'", start)
                end = length - 1
            index = end + 1
            append(Token(TokenKind.WORD, text[start:index], start, index))
        else:  # raw_string
            closing = '"' + text[start + 1:index - 1]
            end = text.find(closing, index)
            if end == -1:
                if strict:
                    raise LexError(f"a raw string opened at {position(text, start)} is never closed: add {closing!r}", start)
                index = length
            else:
                index = end + len(closing)
            append(Token(TokenKind.STRING, text[start:index], start, index))


def refuse_unopened_comment_close(text: str, tokens: list[Token]) -> None:
    """LexError at a ``-/`` that closes no comment (Lean refuses it; the lexer reads it as a symbol)."""
    if not tokens or text.find("-/", tokens[0].start) == -1:
        return  # most statements: no '-/' at all, so no token to look for
    for token in tokens:
        if token.kind == TokenKind.SYMBOL and token.text == "-/":
            raise LexError(f"'-/' at {position(text, token.start)} closes a comment that was never opened: remove it "
                           "or add the '/-'", token.start)


def _block_comment_end(text: str, index: int, strict: bool) -> int:
    # As Lean's whitespace/finishCommentBlock: ``/--`` and ``/-!`` open doc comments whose body
    # starts after the third character (so ``/--/`` is not closed); a plain ``/-`` also consumes
    # the character after it (so ``/-/- -/`` is one comment, not two nested openings).
    depth, cursor = 1, min(index + 3, len(text))
    while depth:
        delimiter = _COMMENT_DELIMITER.search(text, cursor)
        if delimiter is None:
            if strict:
                raise LexError(
                    f"a block comment opened at {position(text, index)} is never closed ({depth} '-/' missing; "
                    "block comments nest in Lean 4): close it with '-/'", index, is_unclosed_comment=True,
                )
            return len(text)
        depth += 1 if delimiter.group() == "/-" else -1
        cursor = delimiter.end()
    return cursor


def _string_end(text: str, index: int, strict: bool) -> int:
    string = _STRING.match(text, index)
    if string is None:
        if strict:
            raise LexError(f"a string opened at {position(text, index)} is never closed: add the closing '\"'", index)
        return len(text)
    return string.end()


def doc_comment_inside(text: str) -> str | None:
    """The inside of ``text`` (surrounding whitespace aside) when it is exactly one closed doc comment
    (``/-- … -/``), stripped; None for anything else, prose included (never scanned as Lean, where a
    lone quote would open a string)."""
    stripped = text.strip()
    if not stripped.startswith(DOC_COMMENT_OPENER):
        return None
    try:
        tokens = scan(stripped, strict=True)
    except LexError:
        return None
    if len(tokens) != 1 or tokens[0].kind != TokenKind.DOC_COMMENT:
        return None
    return stripped[len(DOC_COMMENT_OPENER):-len("-/")].strip()


def comment_spans(text: str, *, strict: bool = False) -> list[tuple[int, int]]:
    """``(start, end)`` of every comment, doc comments included, in order."""
    return [(token.start, token.end) for token in scan(text, strict=strict) if token.kind in COMMENT_KINDS]


def comment_mask(text: str, *, strict: bool = False) -> list[bool]:
    """For each character of ``text``, whether it lies in a comment (delimiters included)."""
    mask = [False] * len(text)
    for start, end in comment_spans(text, strict=strict):
        mask[start:end] = [True] * (end - start)
    return mask


def blank_comments(text: str, *, strict: bool = True) -> str:
    """``text`` with every comment character replaced by a space, newlines kept: every other
    character keeps its offset, line and column."""
    out = list(text)
    for start, end in comment_spans(text, strict=strict):
        for offset in range(start, end):
            if out[offset] != "\n":
                out[offset] = " "
    return "".join(out)


def strip_comments(text: str, *, strict: bool = False, rule: CommentRule = CommentRule.LEAN) -> str:
    """``text`` without its comments; newlines inside block comments stay, so lines keep their numbers.

    With ``rule=CommentRule.KIMINA_RELEASE``, the release's comments instead (see there): nothing of
    them stays, newlines included, and nothing is refused, so ``strict`` must be False.
    """
    if CommentRule(rule) == CommentRule.KIMINA_RELEASE:
        if strict:
            raise ValueError("the Kimina release's comment rule refuses nothing: call strip_comments with strict=False")
        return _strip_comments_as_the_kimina_release_does(text)
    pieces: list[str] = []
    cursor = 0
    for start, end in comment_spans(text, strict=strict):
        pieces.append(text[cursor:start])
        pieces.append("\n" * text.count("\n", start, end))
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces)


# ------------------------------------------------------------------------------ the Kimina release's rule

# The Kimina-Prover-RL release's comment rule (its proof_utils.remove_comments), kept because our
# default format reward must give the release's checker's verdict on every answer
# (tests/recipe/test_format_check_agrees_with_the_release.py). It is not Lean's: ``/-`` runs to the
# first ``-/`` (no nesting; ``--/`` ends there too), then, in what is left, ``--`` runs to the end of
# the line; strings, character literals and «names» hide nothing; an unclosed ``/-`` is no comment.
# Its differences from Lean's are stated in tests/verification/test_lean_lexer_properties.py.
_KIMINA_RELEASE_BLOCK_COMMENT = re.compile(r"/-.*?(?:--/|-/)", re.DOTALL)
_KIMINA_RELEASE_LINE_COMMENT = re.compile(r"--.*")


def _strip_comments_as_the_kimina_release_does(text: str) -> str:
    return _KIMINA_RELEASE_LINE_COMMENT.sub("", _KIMINA_RELEASE_BLOCK_COMMENT.sub("", text))
