"""The one Lean lexer, a security boundary: properties that must hold for any text, and the
readers built on it (integrity rules, stand-in, promptset validation) agreeing with it; and the
Kimina release's comment rule, which is not Lean's, with its differences from Lean's stated."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer.verification import lean_lexer
from trainer.verification.lean_lexer import (
    COMMENT_KINDS, CommentRule, LexError, TokenKind, blank_comments, comment_spans, scan, strip_comments,
)

# Text made of the characters that matter to a Lean reader, so examples hit the corners often.
TRICKY = st.lists(st.sampled_from(list("-/\"'«»\n\\ r#!{}ab_.:=()0x1é₀") + ["--", "/-", "-/", "/--", "\r\n"]),
                  max_size=40).map("".join)
FILLER = st.text(alphabet=list("ab x=+()\n:_.₀∀"), max_size=12)

CODE_PIECES = st.sampled_from([
    "theorem", "t", "(h₀", ":", "x", "≤", "y)", ":=", "by", "norm_num", "simp", "[h₀]", "x'", "h'", "2", "0x1F", "3.5",
    "exact", "⟨1,", "2⟩", "fun", "n", "=>", "n", "+", "1", "«odd name»", "'a'", "'\\n'", "\"a -- b\"", "\"-/\"",
    "r\"raw -/ \\\"", "r#\"x \" y\"#",
])
COMMENT_TEXTS = ["-- note", "/- block -/", "/-- doc -/", "/- a /- nested -/ b -/", "/-\nmulti\nline\n-/", "--/ odd"]
COMMENTS = st.sampled_from(COMMENT_TEXTS)


def assert_tokens_tile_the_text(text: str, tokens) -> None:
    cursor = 0
    for token in tokens:
        assert token.start >= cursor and token.end > token.start
        assert text[token.start:token.end] == token.text
        assert text[cursor:token.start].strip() == "", (text, token)
        cursor = token.end
    assert text[cursor:].strip() == ""


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_lenient_scanning_tiles_any_text_with_tokens_and_whitespace(text):
    assert_tokens_tile_the_text(text, scan(text, strict=False))


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_strict_scanning_either_reads_like_the_lenient_one_or_refuses_with_an_offset(text):
    try:
        tokens = scan(text, strict=True)
    except LexError as error:
        assert 0 <= error.offset < len(text) and str(error)
        return
    assert tokens == scan(text, strict=False)


@settings(max_examples=600, deadline=None)
@given(TRICKY, TRICKY)
def test_a_prefix_that_ends_a_line_and_scans_alone_reads_the_same_as_within_the_whole_text(prefix, rest):
    prefix += "\n"
    text = prefix + rest
    try:
        prefix_tokens = scan(prefix, strict=True)
    except LexError:
        return  # the claim is only for a prefix that closes what it opens
    try:
        whole = scan(text, strict=True)
    except LexError as whole_error:
        with pytest.raises(LexError) as rest_error:
            scan(text, strict=True, start=len(prefix))
        assert str(rest_error.value) == str(whole_error)
        return
    assert prefix_tokens + scan(text, strict=True, start=len(prefix)) == whole


@settings(max_examples=400, deadline=None)
@given(TRICKY)
def test_blanking_comments_never_changes_length_lines_or_any_character_outside_a_comment(text):
    blanked = blank_comments(text, strict=False)
    assert len(blanked) == len(text)
    assert [i for i, c in enumerate(blanked) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]
    inside = [False] * len(text)
    for start, end in comment_spans(text):
        inside[start:end] = [True] * (end - start)
    for original, new, is_comment in zip(text, blanked, inside):
        assert new == (original if not is_comment or original == "\n" else " ")


@settings(max_examples=300, deadline=None)
@given(TRICKY)
def test_stripping_comments_keeps_the_line_count(text):
    assert strip_comments(text).count("\n") == text.count("\n")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(CODE_PIECES, COMMENTS), max_size=20))
def test_code_and_strings_outside_comments_are_preserved_exactly(pieces):
    text = "\n".join(pieces)
    kept = [piece for piece in pieces if piece not in COMMENT_TEXTS]
    blanked = blank_comments(text)
    assert " ".join(blanked.split()) == " ".join(" ".join(kept).split())


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=6), FILLER)
def test_nested_comments_close_only_at_their_own_depth(depth, filler):
    text = "/- " * depth + filler + " -/" * depth + " sorry"
    tokens = scan(text)
    assert tokens[0].kind is TokenKind.COMMENT and tokens[0].text == text[:-len(" sorry")]
    assert tokens[-1].text == "sorry"


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=1, max_value=6), FILLER)
def test_an_unterminated_comment_is_refused_strictly_and_runs_to_the_end_leniently(depth, filler):
    text = "exact h " + "/- " * depth + filler + " -/" * (depth - 1) + " sorry"
    with pytest.raises(LexError, match="never closed"):
        scan(text)
    assert comment_spans(text) == [(len("exact h "), len(text))]
    assert "sorry" not in blank_comments(text, strict=False)


@pytest.mark.parametrize("text", ['"unterminated -- x', "«never closed", 'r#"raw never closed"', "/- open"])
def test_unterminated_literals_are_refused(text):
    with pytest.raises(LexError):
        scan(text)


def test_lean_lexical_corners():
    kinds = lambda text: [(t.kind.value, t.text) for t in scan(text)]
    assert kinds('"a -- b" -- c') == [("string", '"a -- b"'), ("comment", "-- c")]
    # A comment does not know strings: its quote does not hide the -/.
    assert kinds('/- " -/ x') == [("comment", '/- " -/'), ("word", "x")]
    assert kinds("h' 'a' '\\n'") == [("word", "h'"), ("char", "'a'"), ("char", "'\\n'")]
    assert kinds('r#"a"b"# c') == [("string", 'r#"a"b"#'), ("word", "c")]
    assert kinds('r"\\" d') == [("string", 'r"\\"'), ("word", "d")]
    assert kinds("«a -- b» c") == [("word", "«a -- b»"), ("word", "c")]
    assert kinds("2set_option") == [("number", "2"), ("word", "set_option")]
    assert scan("/-- doc -/")[0].kind is TokenKind.DOC_COMMENT
    # Lean's reading: the character after "/-" opens nothing and closes nothing.
    assert kinds("/--/ x -/ y") == [("doc_comment", "/--/ x -/"), ("word", "y")]
    assert kinds("/-/- -/ sorry") == [("comment", "/-/- -/"), ("word", "sorry")]
    with pytest.raises(LexError):
        scan("/--/")
    with pytest.raises(LexError, match="interpolated"):
        scan('s!"x {"y"} z"')


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(CODE_PIECES.filter(lambda p: not re.search("[\"'«]", p)), COMMENTS), max_size=15))
def test_the_integrity_rules_the_standin_and_validation_read_comments_as_the_lexer_does(pieces):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "platform"))
    from promptsets.validation import scan as validation_scan
    from trainer.verification.integrity import strip_comments as integrity_strip
    from trainer.verification.standin import blank_comments as standin_blank

    text = "\n".join(pieces)
    expected = lean_lexer.blank_comments(text)
    assert integrity_strip(text)[0] == expected
    assert standin_blank(text) == expected
    spans = [(t.start, t.end) for t in validation_scan(text) if t.kind in COMMENT_KINDS]
    assert spans == comment_spans(text)


# ------------------------------------------------------------------------------ the Kimina release's rule

NON_NESTED_COMMENTS = st.sampled_from([text for text in COMMENT_TEXTS if text.count("/-") < 2])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(CODE_PIECES.filter(lambda p: not re.search("[\"'«]", p)), NON_NESTED_COMMENTS), max_size=15))
def test_without_literals_or_nesting_the_releases_rule_removes_the_comments_lean_reads(pieces):
    # Only the newlines inside block comments differ: Lean's strip keeps them, the release's does not.
    text = "\n".join(pieces)
    release = strip_comments(text, rule=CommentRule.KIMINA_RELEASE)
    assert " ".join(release.split()) == " ".join(strip_comments(text).split())


@pytest.mark.parametrize(("text", "by_the_release", "by_lean"), [
    # Block comments do not nest: the first -/ closes, the rest is code.
    ("/- a /- b -/ c -/ d", " c -/ d", " d"),
    # Strings, «names» hide no delimiter: the release cuts them open.
    ('#eval "a -- b" x', '#eval "a ', '#eval "a -- b" x'),
    ('#eval "/- x" -/ y', '#eval " y', '#eval "/- x" -/ y'),
    ("«a -- b» c", "«a ", "«a -- b» c"),
    # Block comments go first, so a /- inside a line comment opens one, and the code after its -/
    # joins the line comment.
    ("-- a /- b\nc -/ d", "", "\nc -/ d"),
    # The character after /- may close it: /--/ is a whole comment, not an open doc comment.
    ("/--/ x -/ y", " x -/ y", " y"),
    # An unclosed /- is no comment at all; Lean's lenient reading runs it to the end.
    ("x /- never closed", "x /- never closed", "x "),
    # Nothing of a block comment stays, its newlines neither.
    ("/-\nnote\n-/x", "x", "\n\nx"),
])
def test_the_releases_rule_differs_from_leans_as_stated(text, by_the_release, by_lean):
    assert strip_comments(text, rule=CommentRule.KIMINA_RELEASE) == by_the_release
    assert strip_comments(text, rule=CommentRule.LEAN) == by_lean


def test_the_releases_rule_has_no_strict_reading():
    with pytest.raises(ValueError, match="strict=False"):
        strip_comments("/- open", strict=True, rule=CommentRule.KIMINA_RELEASE)
