"""Rules a proof body must keep to earn anything, whatever Lean says about it.

A policy under RL pressure finds every loophole of its reward. Lean accepting the code is
necessary, not sufficient: a body that declares an axiom, runs code at elaboration time,
turns off kernel checking, adds imports or closes goals with ``sorry`` proves nothing.
These rules are checked on the model's proof body before anything is sent to Lean; the
axioms Lean reports for the accepted theorem are checked afterwards
(``disallowed_axioms``). Each rejection says why.

The snippets a model asks Lean about inside its reasoning (``rollout.lean_tool_calls``,
trainer/rollout/lean_tool.py) keep the same rules (``check_snippet_integrity``): a snippet runs on
the same shared REPLs, so ``#eval`` or ``IO`` there would run programs on the Lean server, and a
policy under reward pressure learns whatever the server lets it do. A snippet is whole
declarations, so it may declare the theorems it tries (``SNIPPET_DECLARATION_KEYWORDS``); and,
since it is checked while its answer waits, it may not be longer than ``MAX_SNIPPET_CHARACTERS``.
A refused snippet never reaches the server.

The scan runs on the body with comments removed (a ``-- no sorry here`` comment is
harmless), as read by the one Lean lexer (``trainer/verification/lean_lexer.py``) that the format check,
the stand-in and promptset validation share. Where a construct could make that reader
disagree with Lean's (string literals), the body is rejected outright rather than scanned on
a guess.

Attacks tried against these rules: ``tests/verification/test_integrity_attack_table.py``; against the
snippet rules: ``tests/rollout/test_a_refused_snippet_never_reaches_the_lean_server.py``.
"""

from __future__ import annotations

import re
from typing import Any

from trainer.verification.lean_lexer import COMMENT_KINDS, LexError, TokenKind, scan

STANDARD_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})
# What native_decide adds when it is allowed: it trusts the compiler.
NATIVE_DECIDE_AXIOMS = frozenset({"Lean.ofReduceBool", "Lean.trustCompiler"})

# Options a proof may raise locally (``set_option maxHeartbeats 400000 in``): resource limits only.
ALLOWED_OPTIONS = frozenset(
    {"maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats", "synthInstance.maxSize"}
)

_IDENTIFIER_CHARS = r"\w.'!?"
_COMMAND_KEYWORDS = (
    "theorem lemma def example abbrev instance structure class inductive coinductive "
    "namespace section end universe variable export attribute deriving mutual opaque "
    "noncomputable partial private protected local scoped alias omit include initialize "
    "builtin_initialize declare_syntax_cat register_option register_simp_attr"
).split()
_METAPROGRAMMING_KEYWORDS = (
    "run_cmd run_tac run_elab run_meta by_elab elab elab_rules macro macro_rules syntax "
    "notation infix infixl infixr prefix postfix"
).split()


def _token(word: str) -> re.Pattern[str]:
    """``word`` as a whole Lean token: not part of a longer identifier."""
    return re.compile(rf"(?<![{_IDENTIFIER_CHARS}]){re.escape(word)}(?![\w'!?])")


def _identifier_prefix(prefix: str) -> re.Pattern[str]:
    """An identifier that starts with ``prefix`` (``unsafe`` matches ``unsafeCast`` too)."""
    return re.compile(rf"(?<![{_IDENTIFIER_CHARS}]){re.escape(prefix)}")


# (pattern, reason). Order matters only for which reason is listed first.
_RULES: list[tuple[re.Pattern[str], str]] = [
    (_token("sorry"), "uses sorry: an unproved goal"),
    (_token("admit"), "uses admit: an unproved goal"),
    (_identifier_prefix("sorryAx"), "uses sorryAx: an unproved goal"),
    (_token("stop"), "uses stop: it abandons the rest of the proof as sorry"),
    (_token("axiom"), "declares an axiom: a new assumption proves anything"),
    (_token("axioms"), "declares or queries axioms: only our own axioms query may"),
    (_identifier_prefix("unsafe"), "uses unsafe code: it escapes the kernel's checks"),
    (_token("implemented_by"), "uses implemented_by: it swaps in unchecked code"),
    (_token("extern"), "uses extern: it swaps in unchecked code"),
    (_token("import"), "adds an import: the environment is fixed by the problem's header"),
    (re.compile(r"#(?!\[)[A-Za-z_]"), "runs a # command (#eval, #exit, #print…): commands are not proofs"),
    (re.compile(r"@\["), "adds an attribute: attributes change the environment, not the goal"),
    (_token("IO"), "runs code (IO): a proof may not execute anything"),
    (_identifier_prefix("IO."), "runs code (IO): a proof may not execute anything"),
    (_token("EIO"), "runs code (EIO): a proof may not execute anything"),
    (_token("BaseIO"), "runs code (BaseIO): a proof may not execute anything"),
    (_identifier_prefix("Lean.Elab"), "reaches into the elaborator (Lean.Elab): metaprogramming is not a proof"),
    (_identifier_prefix("Lean.Meta"), "reaches into the elaborator (Lean.Meta): metaprogramming is not a proof"),
    (_identifier_prefix("Lean.Environment"), "edits the environment (Lean.Environment)"),
    (_identifier_prefix("Lean.Kernel"), "reaches into the kernel (Lean.Kernel)"),
    (_identifier_prefix("Lean.Compiler"), "reaches into the compiler (Lean.Compiler)"),
    (_token("addDecl"), "adds a declaration by metaprogramming (addDecl)"),
]
_RULES += [(_token(word), f"runs code ({word}): a proof may not execute anything") for word in _METAPROGRAMMING_KEYWORDS]
_DECLARATION_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    word: (_token(word), f"contains the command keyword '{word}': the body must be a proof, not new declarations")
    for word in _COMMAND_KEYWORDS
}

# A tool snippet is the declarations it asks Lean to check (trainer/recipe/format_reward.py has its syntax): these
# and no other. ``def``, ``instance``, ``namespace``… are not needed to try a proof, and stay refused as in a proof.
SNIPPET_DECLARATION_KEYWORDS = frozenset({"theorem", "lemma", "example"})
# A snippet is checked while its answer waits, on the REPLs the run's final proofs share: a long one holds a REPL
# (and costs the answer its reply's tokens) for what a few declarations can say. About 2,000 tokens.
MAX_SNIPPET_CHARACTERS = 8000

_NATIVE_DECIDE_RULES: list[tuple[re.Pattern[str], str]] = [
    (_token("native_decide"), "uses native_decide: it trusts the compiler (reward.allow_native_decide is off)"),
    (_identifier_prefix("Lean.ofReduceBool"), "uses Lean.ofReduceBool: it trusts the compiler (reward.allow_native_decide is off)"),
    (_identifier_prefix("Lean.reduceBool"), "uses Lean.reduceBool: it trusts the compiler (reward.allow_native_decide is off)"),
    (_identifier_prefix("ofReduceBool"), "uses ofReduceBool: it trusts the compiler (reward.allow_native_decide is off)"),
    (re.compile(r"(?<![\w.'!?])decide\s*\+\s*native"), "uses decide +native: it trusts the compiler (reward.allow_native_decide is off)"),
]

_SET_OPTION = re.compile(r"(?<![\w.'!?])set_option\s+(?P<name>[^\s]+)")
_OPEN = re.compile(r"(?<![\w.'!?])open\b(?P<rest>[^\n]*)")
# Control characters, and every line break but "\n": kimina-lean-server splits snippets with
# Python's splitlines() and re-joins them with "\n", so a U+2028 inside a "-- comment" would
# become a real line break, and code hidden from this scan, by the time Lean reads it.
_CONTROL_CHARACTERS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x85\u2028\u2029]|\r(?!\n)")


class _UnscannableBody(Exception):
    pass


def strip_comments(code: str) -> tuple[str, list[str]]:
    """The code with comments blanked out (lines kept), and the names written as «…».

    Read by the one Lean lexer (``trainer.verification.lean_lexer``): block comments nest; ``«…»`` names may
    contain anything, even ``--``, so they are blanked too and returned separately for their own
    scan. String literals are refused: a quote inside a character literal would make a reader and
    Lean disagree about where a string ends, and a proof never needs one.
    """
    if '"' in code:
        raise _UnscannableBody("contains a string literal: proofs never need one, and it can hide code from these checks")
    try:
        tokens = scan(code, strict=True)
    except LexError as error:
        if code.startswith("«", error.offset):
            raise _UnscannableBody("has an unterminated «name»: Lean would read the rest differently than this check") from None
        raise _UnscannableBody("has an unterminated comment: it would swallow the rest of the checked code") from None
    out = list(code)
    quoted_names: list[str] = []
    for token in tokens:
        is_quoted_name = token.kind == TokenKind.WORD and token.text.startswith("«")
        if token.kind in COMMENT_KINDS or is_quoted_name:
            if is_quoted_name:
                quoted_names.append(token.text[1:-1])
            for offset in range(token.start, token.end):
                if out[offset] != "\n":
                    out[offset] = " "
    return "".join(out), quoted_names


def check_integrity(proof_body: str, config: Any) -> list[str]:
    """Why this proof body earns nothing whatever Lean says; an empty list when it is clean.

    ``config`` is the run's ``RewardConfig`` (``allow_native_decide``).
    """
    return _broken_rules(proof_body, config, allowed_declarations=frozenset())


def check_snippet_integrity(snippet: str, config: Any) -> list[str]:
    """Why a snippet the model wrote in its reasoning is refused without reaching Lean; an empty list when it may go.

    A proof's rules, with the declarations a snippet is made of allowed, and its length bounded.
    ``config`` is the run's ``RewardConfig`` (``allow_native_decide``).
    """
    if len(snippet) > MAX_SNIPPET_CHARACTERS:
        return [f"is {len(snippet)} characters long: a snippet may have at most {MAX_SNIPPET_CHARACTERS}; "
                "check one declaration at a time"]
    return _broken_rules(snippet, config, allowed_declarations=SNIPPET_DECLARATION_KEYWORDS)


def _broken_rules(proof_body: str, config: Any, *, allowed_declarations: frozenset[str]) -> list[str]:
    if _CONTROL_CHARACTERS.search(proof_body):
        return ["contains control characters or unusual line breaks: they have no place in a proof"]
    try:
        code, quoted_names = strip_comments(proof_body)
    except _UnscannableBody as error:
        return [str(error)]
    texts = [code, *quoted_names]
    rules = list(_RULES)
    rules += [rule for word, rule in _DECLARATION_RULES.items() if word not in allowed_declarations]
    if not getattr(config, "allow_native_decide", False):
        rules += _NATIVE_DECIDE_RULES

    reasons: list[str] = []
    for pattern, reason in rules:
        if reason not in reasons and any(pattern.search(text) for text in texts):
            reasons.append(reason)
    for text in texts:
        for match in _SET_OPTION.finditer(text):
            name = match["name"]
            if name not in ALLOWED_OPTIONS:
                reasons.append(
                    f"sets option {name!r}: only resource limits may be set in a proof "
                    f"({', '.join(sorted(ALLOWED_OPTIONS))})"
                )
        for match in _OPEN.finditer(text):
            # ``open Foo in tac`` is scoped to one tactic; a bare ``open`` is a command that
            # outlives the proof and can change what our axioms query resolves to.
            if not re.search(r"(?<![\w.'!?])in\b", match["rest"]):
                reasons.append("contains a bare 'open' command: only the scoped 'open … in' form is allowed")
    return reasons


def disallowed_axioms(axioms: list[str] | tuple[str, ...], *, allow_native_decide: bool) -> list[str]:
    """The axioms of an accepted theorem beyond the standard three (and native_decide's, if allowed)."""
    allowed = set(STANDARD_AXIOMS)
    if allow_native_decide:
        allowed |= NATIVE_DECIDE_AXIOMS
    return [axiom for axiom in axioms if axiom not in allowed]


_AXIOMS_REPORT = re.compile(r"'(?P<name>[^']+)' depends on axioms: \[(?P<axioms>[^\]]*)\]")
_NO_AXIOMS_REPORT = re.compile(r"'(?P<name>[^']+)' does not depend on any axioms")


def parse_axioms_report(text: str) -> tuple[str, list[str]] | None:
    """(theorem name, axioms) from Lean's answer to ``#print axioms``; None if it is not one."""
    match = _AXIOMS_REPORT.search(text)
    if match:
        axioms = [axiom.strip() for axiom in match["axioms"].replace("\n", " ").split(",") if axiom.strip()]
        return match["name"], axioms
    match = _NO_AXIOMS_REPORT.search(text)
    if match:
        return match["name"], []
    return None
