"""The stand-in's judgement: a small fragment of Lean decided honestly, everything else refused.

This is a stand-in for Lean, named as one, for machines without a Lean toolchain. It reads
the same snippets kimina-lean-server does and answers in the REPL's shape, but it decides
only closed propositions over numerals in ℕ, ℤ and ℚ (``+ - * / % ^``, ``= ≠ < ≤ > ≥``,
``∧ ∨ ¬ → ↔``, ``True``, ``False``, type ascriptions), proved by one of ``norm_num``,
``decide``, ``rfl``, ``simp``, ``omega`` (or ``sorry``, or ``exact`` of an ``axiom`` the snippet
declares with the very same statement, so that the guard's ``#print axioms`` check meets a
non-standard axiom as Lean would report it), and only where Lean's own tactic
is known to behave the same way (``omega`` on a goal over ℚ alone fails, as Lean's does). Anything it is unsure about raises ``CannotDecide``; the
server turns that into a per-snippet error that our client scores as censored, never as a
wrong proof.

Positions follow the REPL: lines count from the first line after the import header (which
the server strips), columns are 0-based code points.

Why one piece: the stand-in's parser, evaluator and tactic rules decide one fragment together; what
it refuses is decided by how they meet, and reads best in one file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from trainer.verification import lean_lexer

ACCEPTED_IMPORTS = frozenset({"import Mathlib", "import Aesop"})
HARMLESS_OPTIONS = frozenset({"maxHeartbeats", "maxRecDepth", "synthInstance.maxHeartbeats"})
STANDIN_NOTE = "[lean-standin] decided by the stand-in Lean server (a small fragment of Lean), not by Lean"
MAX_EXPONENT = 256
KERNEL_SAFE_EXPONENT = 64
OMEGA_NO_FACTS = "omega could not prove the goal:\nNo usable constraints found for the atoms."
MAX_BITS = 4096


class CannotDecide(Exception):
    """Outside the fragment, or a case where the stand-in is not sure what Lean would say."""


# ---------------------------------------------------------------------------- source text


def split_header(code: str) -> tuple[list[str], str]:
    """The leading import lines and the body, split where kimina-lean-server splits them."""
    lines = code.splitlines()
    index = 0
    while index < len(lines) and (not lines[index].strip() or lines[index].strip().startswith("import ")):
        index += 1
    imports = [line.strip() for line in lines[:index] if line.strip()]
    return imports, "\n".join(lines[index:])


def blank_comments(text: str) -> str:
    """Comments replaced by spaces, so every other character keeps its line and column (read by
    the one Lean lexer, ``trainer.verification.lean_lexer``). Literals are outside the fragment."""
    try:
        tokens = lean_lexer.scan(text, strict=True)
    except lean_lexer.LexError as error:
        if error.is_unclosed_comment:
            raise CannotDecide("an unterminated comment") from None
        raise CannotDecide("string, character or «quoted» literals are outside the fragment") from None
    if any(token.kind not in lean_lexer.COMMENT_KINDS and any(mark in token.text for mark in "\"'«") for token in tokens):
        raise CannotDecide("string, character or «quoted» literals are outside the fragment")
    return lean_lexer.blank_comments(text)


@dataclass(frozen=True)
class Position:
    line: int  # 1-based, counted in the body
    column: int  # 0-based

    def as_json(self) -> dict:
        return {"line": self.line, "column": self.column}


class Source:
    """The body text with a map from offsets to (line, column)."""

    def __init__(self, text: str):
        self.text = text
        self.line_starts = [0] + [match.end() for match in re.finditer("\n", text)]

    def position(self, offset: int) -> Position:
        line = 0
        low, high = 0, len(self.line_starts) - 1
        while low <= high:
            middle = (low + high) // 2
            if self.line_starts[middle] <= offset:
                line, low = middle, middle + 1
            else:
                high = middle - 1
        return Position(line + 1, offset - self.line_starts[line])


# ---------------------------------------------------------------------------- propositions


@dataclass
class Token:
    kind: str  # "num", "op", "type", "const", "end"
    text: str
    offset: int


_TYPE_NAMES = {"ℕ": "ℕ", "Nat": "ℕ", "ℤ": "ℤ", "Int": "ℤ", "ℚ": "ℚ", "Rat": "ℚ"}
_OPERATORS = ["↔", "→", "∧", "∨", "¬", "≠", "≤", "≥", "<=", ">=", "<", ">", "=", "+", "-", "*", "/", "%", "^", "(", ")", ":"]
_TOKEN = re.compile(
    r"\s*(?:(?P<num>\d+(?![\w.]))|(?P<name>[A-Za-zℕℤℚ_][\w']*)|(?P<op>" + "|".join(re.escape(op) for op in _OPERATORS) + "))"
)


def tokenize(text: str, base_offset: int) -> list[Token]:
    tokens: list[Token] = []
    index = 0
    while index < len(text):
        if text[index:].strip() == "":
            break
        match = _TOKEN.match(text, index)
        if not match:
            raise CannotDecide(f"the token at {text[index:index + 12].strip()!r} is outside the fragment")
        offset = base_offset + match.start(match.lastgroup)
        if match["num"]:
            tokens.append(Token("num", match["num"], offset))
        elif match["name"]:
            name = match["name"]
            if name in _TYPE_NAMES:
                tokens.append(Token("type", _TYPE_NAMES[name], offset))
            elif name in ("True", "False"):
                tokens.append(Token("const", name, offset))
            else:
                raise CannotDecide(f"the name {name!r} is outside the fragment (only numerals and True/False)")
        else:
            tokens.append(Token("op", {"<=": "≤", ">=": "≥"}.get(match["op"], match["op"]), offset))
        index = match.end()
    tokens.append(Token("end", "", base_offset + len(text)))
    return tokens


# Expression trees: ("num", n) | ("neg", e) | ("bin", op, a, b) | ("ascribe", e, type) | ("pow", a, e)
# Propositions: ("const", bool) | ("not", p) | ("conn", op, p, q) | ("cmp", op, a, b)
_CONNECTIVE_PRECEDENCE = {"↔": (20, 21, 21), "→": (25, 26, 25), "∨": (30, 31, 30), "∧": (35, 36, 35)}
_COMPARISONS = {"=", "≠", "<", ">", "≤", "≥"}


class PropositionParser:
    """Precedence climbing with Lean's levels: ↔ 20, → 25 (right), ∨ 30 (right), ∧ 35 (right),
    ¬ 40, comparisons 50, + - 65, * / % 70, ^ 75 (right)."""

    def __init__(self, tokens: list[Token]):
        self.tokens = tokens
        self.index = 0

    def peek(self) -> Token:
        return self.tokens[self.index]

    def take(self) -> Token:
        token = self.tokens[self.index]
        self.index += 1
        return token

    def expect(self, text: str) -> None:
        token = self.take()
        if token.text != text or token.kind not in ("op",):
            raise CannotDecide(f"expected {text!r}, found {token.text!r}")

    def parse(self):
        proposition = self.proposition(0)
        if self.peek().kind != "end":
            raise CannotDecide(f"unexpected {self.peek().text!r} in the statement")
        return proposition

    def proposition(self, minimum: int):
        left = self.proposition_atom()
        while True:
            token = self.peek()
            if token.kind != "op" or token.text not in _CONNECTIVE_PRECEDENCE:
                return left
            level, _, right_minimum = _CONNECTIVE_PRECEDENCE[token.text]
            if level < minimum:
                return left
            self.take()
            right = self.proposition(right_minimum)
            if token.text == "↔" and self.peek().text == "↔":
                raise CannotDecide("chained ↔ is outside the fragment")
            left = ("conn", token.text, left, right)

    def proposition_atom(self):
        token = self.peek()
        if token.kind == "op" and token.text == "¬":
            self.take()
            return ("not", self.proposition(40))
        if token.kind == "const":
            self.take()
            return ("const", token.text == "True")
        if token.kind == "op" and token.text == "(" and self._parenthesised_proposition():
            self.take()
            inner = self.proposition(0)
            self.expect(")")
            return inner
        left = self.expression(51)
        operator = self.take()
        if operator.kind != "op" or operator.text not in _COMPARISONS:
            raise CannotDecide(f"expected a comparison, found {operator.text!r}")
        right = self.expression(51)
        if self.peek().kind == "op" and self.peek().text in _COMPARISONS:
            raise CannotDecide("chained comparisons are outside the fragment")
        return ("cmp", operator.text, left, right)

    def _parenthesised_proposition(self) -> bool:
        """Whether the group opened here holds a proposition (a connective, comparison or constant)
        rather than arithmetic such as ``(2 + 3) * 4`` or an ascription ``(2 : ℤ)``."""
        depth = 0
        for token in self.tokens[self.index :]:
            if token.text == "(" and token.kind == "op":
                depth += 1
            elif token.text == ")" and token.kind == "op":
                depth -= 1
                if depth == 0:
                    return False
            elif token.kind == "const" or (
                token.kind == "op" and (token.text in _COMPARISONS or token.text in _CONNECTIVE_PRECEDENCE or token.text == "¬")
            ):
                return True
        return False

    def expression(self, minimum: int):
        left = self.expression_atom()
        while True:
            token = self.peek()
            if token.kind != "op":
                return left
            if token.text in ("+", "-") and minimum <= 65:
                self.take()
                left = ("bin", token.text, left, self.expression(66))
            elif token.text in ("*", "/", "%") and minimum <= 70:
                self.take()
                left = ("bin", token.text, left, self.expression(71))
            elif token.text == "^" and minimum <= 75:
                self.take()
                left = ("pow", left, self.expression(75))
            else:
                return left

    def expression_atom(self):
        token = self.take()
        if token.kind == "num":
            return ("num", int(token.text))
        if token.kind == "op" and token.text == "-":
            operand = self.expression_atom()
            if self.peek().text == "^":
                # Whether -a^b is -(a^b) or (-a)^b depends on notation levels we do not pin down.
                raise CannotDecide("unary minus before ^ is outside the fragment")
            return ("neg", operand)
        if token.kind == "op" and token.text == "(":
            inner = self.expression(0)
            if self.peek().text == ":":
                self.take()
                type_token = self.take()
                if type_token.kind != "type":
                    raise CannotDecide(f"the type {type_token.text!r} is outside the fragment (ℕ, ℤ, ℚ)")
                self.expect(")")
                return ("ascribe", inner, type_token.text)
            self.expect(")")
            return inner
        raise CannotDecide(f"unexpected {token.text!r} in an arithmetic expression")


def parse_proposition(text: str, base_offset: int = 0):
    return PropositionParser(tokenize(text, base_offset)).parse()


# ---------------------------------------------------------------------------- semantics


@dataclass
class Features:
    """What a proposition uses, to decide which tactics are known to close it."""

    types: set[str] = field(default_factory=set)
    operators: set[str] = field(default_factory=set)
    connectives: set[str] = field(default_factory=set)
    divides_by_zero: bool = False
    negative_divisor: bool = False
    largest_exponent: int = 0
    has_constants: bool = False  # True or False written in the statement


def _ascribed_types(expression) -> set[str]:
    """Types fixed by ascriptions in one elaboration tree (not inside exponents or ascriptions)."""
    kind = expression[0]
    if kind == "ascribe":
        return {expression[2]}
    if kind == "neg":
        return _ascribed_types(expression[1])
    if kind == "bin":
        return _ascribed_types(expression[2]) | _ascribed_types(expression[3])
    if kind == "pow":
        return _ascribed_types(expression[1])
    return set()


def _tree_type(*expressions) -> str:
    """The type Lean's binop% elaborator gives a tree of numerals: the ascribed one, else ℕ."""
    types = set().union(*(_ascribed_types(expression) for expression in expressions))
    if len(types) > 1:
        # Lean would insert coercions (↑); how each tactic treats them is not pinned down here.
        raise CannotDecide(f"mixed types {sorted(types)} in one comparison")
    return types.pop() if types else "ℕ"


def _check_size(value: Fraction) -> Fraction:
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise CannotDecide("numbers too large for the stand-in")
    return value


def evaluate(expression, type_name: str, features: Features) -> Fraction:
    kind = expression[0]
    features.types.add(type_name)
    if kind == "num":
        return Fraction(expression[1])
    if kind == "ascribe":
        inner_types = _ascribed_types(expression[1])
        if inner_types - {expression[2]}:
            raise CannotDecide("an ascription that needs a coercion")
        if expression[2] != type_name:
            raise CannotDecide("an ascription that needs a coercion")
        return evaluate(expression[1], expression[2], features)
    if kind == "neg":
        if type_name == "ℕ":
            raise CannotDecide("negation in ℕ (Lean: failed to synthesize Neg ℕ)")
        features.operators.add("neg")
        return -evaluate(expression[1], type_name, features)
    if kind == "pow":
        exponent_type = _tree_type(expression[2])
        if exponent_type != "ℕ":
            raise CannotDecide("an exponent outside ℕ")
        features.operators.add("^")
        base = evaluate(expression[1], type_name, features)
        exponent = evaluate(expression[2], "ℕ", features)
        features.types.add(type_name)
        if exponent > MAX_EXPONENT:
            raise CannotDecide(f"exponent above {MAX_EXPONENT}")
        features.largest_exponent = max(features.largest_exponent, int(exponent))
        if base == 0 and exponent == 0:
            return Fraction(1)
        return _check_size(base ** int(exponent))
    operator, left, right = expression[1], evaluate(expression[2], type_name, features), evaluate(expression[3], type_name, features)
    features.operators.add(operator)
    if operator == "+":
        return _check_size(left + right)
    if operator == "*":
        return _check_size(left * right)
    if operator == "-":
        difference = left - right
        return max(difference, Fraction(0)) if type_name == "ℕ" else difference
    if operator in ("/", "%"):
        if right == 0:
            features.divides_by_zero = True
        if type_name == "ℚ":
            if operator == "%":
                raise CannotDecide("% on ℚ is outside the fragment")
            return Fraction(0) if right == 0 else left / right
        if right < 0:
            features.negative_divisor = True
            raise CannotDecide("integer division by a negative number")
        if right == 0:
            return Fraction(0) if operator == "/" else left
        quotient = left.numerator // right.numerator  # floor = Euclidean for a positive divisor
        return Fraction(quotient) if operator == "/" else left - right * quotient
    raise CannotDecide(f"operator {operator!r}")


def truth(proposition, features: Features) -> bool:
    kind = proposition[0]
    if kind == "const":
        features.has_constants = True
        return proposition[1]
    if kind == "not":
        features.connectives.add("¬")
        return not truth(proposition[1], features)
    if kind == "conn":
        features.connectives.add(proposition[1])
        left, right = truth(proposition[2], features), truth(proposition[3], features)
        return {"∧": left and right, "∨": left or right, "→": (not left) or right, "↔": left == right}[proposition[1]]
    operator, left_tree, right_tree = proposition[1], proposition[2], proposition[3]
    type_name = _tree_type(left_tree, right_tree)
    left, right = evaluate(left_tree, type_name, features), evaluate(right_tree, type_name, features)
    features.operators.add(operator)
    return {"=": left == right, "≠": left != right, "<": left < right, ">": left > right, "≤": left <= right, "≥": left >= right}[operator]


def _omega_sees_no_facts(features: Features) -> bool:
    """omega reasons about ℕ and ℤ only: a goal whose every comparison is over ℚ gives it no fact,
    so it fails whether the statement is true or not (True/False constants aside, which it uses)."""
    return features.types == {"ℚ"} and not features.has_constants


def _closes(tactic: str, proposition, features: Features) -> bool:
    """Whether ``tactic`` is known to close this (true) proposition; CannotDecide where unsure."""
    if features.divides_by_zero:
        raise CannotDecide("division by zero: how each tactic treats it is not pinned down here")
    if tactic == "norm_num":
        return True
    if tactic in ("decide", "simp", "rfl") and features.largest_exponent > KERNEL_SAFE_EXPONENT:
        # Lean's evaluator refuses large powers (its exponentiation threshold); norm_num does not.
        raise CannotDecide(f"{tactic} with an exponent above {KERNEL_SAFE_EXPONENT}")
    if tactic == "decide":
        if features.types != {"ℕ"}:
            raise CannotDecide("decide outside ℕ (ℤ and ℚ instances may not reduce)")
        return True
    if tactic == "simp":
        if features.types != {"ℕ"}:
            raise CannotDecide("simp outside ℕ")
        return True
    if tactic == "omega":
        if (
            features.types - {"ℕ", "ℤ"}
            or "^" in features.operators
            or features.connectives - {"∧", "∨", "¬"}
            or features.has_constants
        ):
            raise CannotDecide("omega outside linear ℕ/ℤ arithmetic with ∧ ∨ ¬")
        return True
    if tactic == "rfl":
        if proposition[0] != "cmp" or proposition[1] != "=" or features.types != {"ℕ"}:
            raise CannotDecide("rfl on anything but an equation in ℕ")
        return True
    raise CannotDecide(f"the tactic {tactic!r}")


# ---------------------------------------------------------------------------- commands


@dataclass
class Message:
    severity: str
    start: Position
    end: Position
    data: str

    def as_json(self) -> dict:
        return {"severity": self.severity, "pos": self.start.as_json(), "endPos": self.end.as_json(), "data": self.data}


_THEOREM = re.compile(r"theorem[ \t]+(?P<name>[A-Za-z_][\w'.]*)")
_TACTIC_WORD = re.compile(r"[A-Za-z_][\w'?!]*")
_KNOWN_TACTICS = {"norm_num", "decide", "rfl", "simp", "omega", "sorry"}


@dataclass
class TheoremResult:
    name: str
    uses_sorry: bool
    has_error: bool
    closing_tactic: str | None
    axioms_used: tuple[str, ...] = ()  # declared axioms the proof applies (``exact cheat``)


_AXIOM = re.compile(r"axiom[ \t]+(?P<name>[A-Za-z_][\w'.]*)")
_EXACT = re.compile(r"exact[ \t]+(?P<name>[A-Za-z_][\w'.]*)")


def _declare_axiom(source: Source, start: int, end: int, axioms: dict[str, str]) -> None:
    """``axiom NAME : P`` with P in the fragment: remembered by its statement text, as Lean adds it (no message)."""
    match = _AXIOM.match(source.text, start)
    colon = re.compile(r"\s*:(?!=)").match(source.text, match.end()) if match else None
    if not colon:
        raise CannotDecide("axioms with binders or hypotheses are outside the fragment")
    parse_proposition(source.text[colon.end() : end], colon.end())
    if match["name"] in axioms:
        raise CannotDecide(f"a second axiom named {match['name']!r}")
    axioms[match["name"]] = " ".join(source.text[colon.end() : end].split())


def _split_commands(source: Source) -> list[tuple[int, int]]:
    """(start, end) offsets of the top-level commands: each starts at a non-space in column 0."""
    starts = [match.start() for match in re.finditer(r"(?m)^(?=\S)", source.text)]
    return [(start, starts[index + 1] if index + 1 < len(starts) else len(source.text)) for index, start in enumerate(starts)]


def _elaborate_theorem(source: Source, start: int, end: int, messages: list[Message], sorries: list[dict],
                       axioms: dict[str, str] | None = None) -> TheoremResult:
    text = source.text
    axioms = axioms or {}
    match = _THEOREM.match(text, start)
    name = match["name"]
    colon = re.compile(r"\s*:(?!=)").match(text, match.end())
    if not colon:
        raise CannotDecide("theorems with binders or hypotheses are outside the fragment")
    assign = text.find(":=", colon.end(), end)
    if assign == -1:
        raise CannotDecide("a theorem without ':='")
    proposition = parse_proposition(text[colon.end() : assign], colon.end())
    by_match = re.compile(r"\s*by\b").match(text, assign + 2)
    if not by_match:
        raise CannotDecide("term-mode proofs are outside the fragment")
    by_offset = by_match.end() - 2

    tactics: list[tuple[str, int]] = []
    statement_text = " ".join(text[colon.end() : assign].split())
    for tactic_match in re.finditer(r"[^\s;]+(?:[ \t]+[^\s;]+)*", text[by_match.end() : end]):
        word = tactic_match.group(0)
        offset = by_match.end() + tactic_match.start()
        exact = _EXACT.fullmatch(word)
        if exact and exact["name"] in axioms:
            if axioms[exact["name"]] != statement_text or len(tactics) or tactic_match.end() != len(text[by_match.end() : end].rstrip()):
                raise CannotDecide(f"exact {exact['name']} where its statement is not the goal's, or beside other tactics")
            return TheoremResult(name, False, False, "exact", (exact["name"],))
        if word not in _KNOWN_TACTICS:
            raise CannotDecide(f"the tactic {word.split()[0]!r} (with arguments, or outside the fragment)")
        tactics.append((word, offset))
    if not tactics:
        raise CannotDecide("an empty tactic block")

    features = Features()
    is_true = truth(proposition, features)
    goal = f"⊢ {statement_text}"
    closed = False
    uses_sorry = False
    closing_tactic = None
    for index, (tactic, offset) in enumerate(tactics):
        start_position, end_position = source.position(offset), source.position(offset + len(tactic))
        if closed:
            messages.append(Message("error", start_position, end_position, "no goals to be proved"))
            return TheoremResult(name, uses_sorry, True, closing_tactic)
        if tactic == "sorry":
            sorries.append({"pos": start_position.as_json(), "endPos": end_position.as_json(), "goal": goal})
            uses_sorry, closed, closing_tactic = True, True, "sorry"
            continue
        if tactic == "omega" and _omega_sees_no_facts(features):
            messages.append(Message("error", start_position, end_position, OMEGA_NO_FACTS))
            return TheoremResult(name, uses_sorry, True, closing_tactic)
        if is_true and _closes(tactic, proposition, features):
            closed, closing_tactic = True, tactic
            continue
        if is_true:
            raise CannotDecide(f"{tactic} on this statement")
        # A false statement: the tactic cannot close it.
        if tactic in ("norm_num", "simp"):
            if index != len(tactics) - 1:
                raise CannotDecide(f"tactics after {tactic} reduced the goal to False")
            _closes(tactic, proposition, features)  # still only where the tactic's reach is known
            by_start = source.position(by_offset)
            block_end = source.position(offset + len(tactic))
            messages.append(Message("error", by_start, block_end, "unsolved goals\n⊢ False"))
        elif tactic == "decide":
            _closes(tactic, proposition, features)
            messages.append(
                Message(
                    "error",
                    start_position,
                    end_position,
                    f"tactic 'decide' proved that the proposition\n  {statement_text}\nis false",
                )
            )
        elif tactic == "rfl":
            _closes(tactic, proposition, features)
            left = " ".join(text[colon.end() : assign].split("=")[0].split())
            right = " ".join(text[colon.end() : assign].split("=", 1)[1].split())
            messages.append(
                Message(
                    "error",
                    start_position,
                    end_position,
                    f"tactic 'rfl' failed, the left-hand side\n  {left}\nis not definitionally equal to the right-hand side\n  {right}\n{goal}",
                )
            )
        elif tactic == "omega":
            _closes(tactic, proposition, features)
            messages.append(Message("error", start_position, end_position, OMEGA_NO_FACTS))
        return TheoremResult(name, uses_sorry, True, closing_tactic)
    if uses_sorry:
        name_position = source.position(match.start("name"))
        name_end = source.position(match.end("name"))
        messages.append(Message("warning", name_position, name_end, "declaration uses 'sorry'"))
    return TheoremResult(name, uses_sorry, False, closing_tactic)


def _axioms_of(result: TheoremResult) -> list[str]:
    if result.uses_sorry or result.has_error:
        return ["sorryAx"]
    if result.axioms_used:
        return list(result.axioms_used)  # `exact cheat` rests on cheat alone, as Lean reports it
    if result.closing_tactic in ("decide", "rfl"):
        return []
    # norm_num, simp and omega proofs go through Mathlib lemmas built on these three.
    return ["propext", "Classical.choice", "Quot.sound"]


def decide_snippet(code: str) -> dict:
    """The REPL's response to ``code`` (``messages``, ``sorries``, ``env``), as the stand-in decides it.

    Raises CannotDecide when the snippet leaves the fragment.
    """
    imports, body = split_header(code)
    for line in imports:
        if line not in ACCEPTED_IMPORTS:
            raise CannotDecide(f"the import {line!r} (the stand-in knows {', '.join(sorted(ACCEPTED_IMPORTS))})")
    source = Source(blank_comments(body))
    messages: list[Message] = [Message("info", Position(1, 0), Position(1, 0), STANDIN_NOTE)]
    sorries: list[dict] = []
    theorems: dict[str, TheoremResult] = {}
    axioms: dict[str, str] = {}
    for start, end in _split_commands(source):
        command = source.text[start:end]
        if command.startswith("set_option"):
            option = re.match(r"set_option\s+(\S+)\s+\S+\s*$", command)
            if not option or option.group(1) not in HARMLESS_OPTIONS:
                raise CannotDecide(f"the option in {command.strip()!r}")
        elif command.startswith("open"):
            if not re.fullmatch(r"open(\s+[A-Z][\w.]*)+\s*", command):
                raise CannotDecide(f"the command {command.strip()!r}")
        elif command.startswith("axiom"):
            _declare_axiom(source, start, end, axioms)
        elif command.startswith("theorem"):
            result = _elaborate_theorem(source, start, end, messages, sorries, axioms)
            if result.name in theorems:
                raise CannotDecide(f"a second theorem named {result.name!r}")
            theorems[result.name] = result
        elif command.startswith("#print axioms"):
            name = command[len("#print axioms") :].strip()
            if name not in theorems:
                raise CannotDecide(f"#print axioms of {name!r}, which the stand-in did not elaborate")
            axioms = _axioms_of(theorems[name])
            text = (
                f"'{name}' depends on axioms: [{', '.join(axioms)}]" if axioms else f"'{name}' does not depend on any axioms"
            )
            position = source.position(start)
            messages.append(Message("info", position, source.position(start + len("#print")), text))
        else:
            raise CannotDecide(f"the command {command.strip().split()[0]!r}")
    if not theorems:
        raise CannotDecide("no theorem to check")
    return {"messages": [message.as_json() for message in messages], "sorries": sorries, "env": 0}
