"""Cold-start demonstrations for the stand-in's fragment: answers in the recipe's full format.

A small instruct model never writes the recipe's shape unprompted (SmolLM2-135M: 0 of 16
samples), so a format-gated reward is 0 everywhere and RL has nothing to climb. The Kimina
models were fine-tuned on demonstrations before RL; these are ours, for closed arithmetic
statements (the fragment the stand-in Lean server decides honestly).

Every answer has the full format, so the h100x8 preset's checks pass it too: a
``<think>`` block whose reasoning tries the proof in two ```tactics blocks (the tactic
alone, then the whole theorem), then one ```lean4 block with the statement and the proof.

The proofs are a mix, on purpose. Most close the goal; some are flawed the way a
prover's first try often is (a tactic that does not reach the statement, such as ``omega``
over ℚ; a second tactic after the goal is already closed, which Lean rejects with "no goals
to be proved"; an attempt at a false statement), so that RL still has something to learn
after fine-tuning. Each demonstration's ``expected_verdict`` is the stand-in's own verdict
on the code Lean would check, never a guess of ours; candidates the stand-in cannot decide
(``decide`` over ℚ, ``omega`` with ``^``) are left out, because a censored answer teaches
RL nothing.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from pathlib import Path

from trainer.config import RewardConfig
from trainer.recipe.format_reward import check_format
from trainer.recipe.problems import DEFAULT_LEAN_HEADER, Problem
from trainer.recipe.prompts import first_attempt_messages
from trainer.verification.checked_code import build_checked_code
from trainer.verification.standin import CannotDecide, decide_snippet

CLOSING_TACTICS = ("decide", "norm_num", "omega", "simp", "rfl")
GENERATED_SOURCE = "generated-fragment"


class AnswerStyle(StrEnum):
    # The recipe's full format: two tactics blocks, the second the whole theorem (h100x8 checks pass).
    FULL = "full"
    # One tactics block, the statement only in the lean4 block: half the tokens, for tiny models
    # under the cpu-demo checks (the h100x8 preset's tactics-block checks reject it).
    BRIEF = "brief"


class ExpectedVerdict(StrEnum):
    VALID = "valid"
    LEAN_ERROR = "lean_error"


@dataclass(frozen=True)
class Demonstration:
    """One answer to one problem, with the verdict the stand-in gives the code Lean would check."""

    problem: Problem
    response: str
    proof_body: str
    expected_verdict: ExpectedVerdict

    def messages(self) -> list[dict[str, str]]:
        """The RL prompt for the problem, then this answer as the assistant's turn."""
        return [*first_attempt_messages(self.problem), {"role": "assistant", "content": self.response}]

    def to_row(self) -> dict:
        """A JSON-lines row that ``trainer.sft.training.load_demonstrations`` reads back into the same prompt."""
        return {
            "problem_id": self.problem.problem_id,
            "formal_statement": self.problem.formal_statement,
            "informal_statement": self.problem.informal_statement,
            "header": self.problem.header,
            "response": self.response,
            "proof_body": self.proof_body,
            "expected_verdict": self.expected_verdict.value,
        }


# --- the statements ------------------------------------------------------------------------------


def _literal(value: int, type_name: str) -> str:
    return f"({value} : {type_name})" if value >= 0 else f"(-{-value} : {type_name})"


def _rational_text(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{value.numerator} / {value.denominator}"


def _generated_statement(rng: random.Random) -> tuple[str, str, bool]:
    """(goal, informal statement, is_true): one closed arithmetic proposition from the fragment."""
    kind = rng.choice(["nat_add", "nat_mul", "nat_pow", "nat_sub", "nat_div", "nat_mod", "nat_lt", "nat_le",
                       "nat_ne", "nat_and", "int_sub", "int_mul", "int_lt", "rat_add", "rat_mul", "rat_lt"])
    a, b = rng.randint(2, 40), rng.randint(2, 12)
    # One statement in eight is false (off by one), as a prover meets false conjectures too.
    is_true = rng.random() >= 0.125
    wrong = 0 if is_true else 1
    if kind == "nat_add":
        return f"{_literal(a, 'ℕ')} + {b} = {a + b + wrong}", f"Show that {a} + {b} = {a + b + wrong}.", is_true
    if kind == "nat_mul":
        return f"{_literal(a, 'ℕ')} * {b} = {a * b + wrong}", f"Show that {a} times {b} is {a * b + wrong}.", is_true
    if kind == "nat_pow":
        base, exponent = rng.randint(2, 5), rng.randint(2, 6)
        value = base ** exponent + wrong
        return f"{_literal(base, 'ℕ')} ^ {exponent} = {value}", f"Show that {base} to the power {exponent} is {value}.", is_true
    if kind == "nat_sub":
        small, large = sorted((a, b))
        return (f"{_literal(small, 'ℕ')} - {large} = {wrong}",
                f"Show that {small} minus {large} in the natural numbers is {wrong} (subtraction stops at zero).", is_true)
    if kind == "nat_div":
        return f"{_literal(a, 'ℕ')} / {b} = {a // b + wrong}", f"Show that {a} divided by {b}, rounded down, is {a // b + wrong}.", is_true
    if kind == "nat_mod":
        remainder = a % b if is_true else (a % b + 1) % b
        return f"{_literal(a, 'ℕ')} % {b} = {remainder}", f"Show that {a} leaves remainder {remainder} when divided by {b}.", is_true
    if kind == "nat_lt":
        small, large = sorted((a, a + b))
        left, right = (small, large) if is_true else (large, small)
        return f"{_literal(left, 'ℕ')} < {right}", f"Show that {left} is less than {right}.", is_true
    if kind == "nat_le":
        left, right = (a, rng.choice([a, a + b])) if is_true else (a + b, a)
        return f"{_literal(left, 'ℕ')} ≤ {right}", f"Show that {left} is at most {right}.", is_true
    if kind == "nat_ne":
        right = a + b if is_true else a
        return f"{_literal(a, 'ℕ')} ≠ {right}", f"Show that {a} is not equal to {right}.", is_true
    if kind == "nat_and":
        return (f"{_literal(a, 'ℕ')} + {b} = {a + b} ∧ {_literal(b, 'ℕ')} * 2 = {2 * b + wrong}",
                f"Show that {a} + {b} = {a + b} and {b} · 2 = {2 * b + wrong}.", is_true)
    if kind == "int_sub":
        return f"{_literal(b, 'ℤ')} - {a + b} = {-a + wrong}", f"Show that {b} − {a + b} = {-a + wrong} in the integers.", is_true
    if kind == "int_mul":
        return f"{_literal(-a, 'ℤ')} * {b} = {-a * b + wrong}", f"Show that −{a} times {b} is {-a * b + wrong}.", is_true
    if kind == "int_lt":
        left, right = (-a, b) if is_true else (b, -a)
        return f"{_literal(left, 'ℤ')} < {right}", f"Show that {left} is less than {right}.", is_true
    p, q = rng.randint(1, 9), rng.randint(2, 9)
    r, s = rng.randint(1, 9), rng.randint(2, 9)
    if kind == "rat_add":
        value = Fraction(p, q) + Fraction(r, s) + wrong
        return (f"{_literal(p, 'ℚ')} / {q} + {r} / {s} = {_rational_text(value)}",
                f"Show that {p}/{q} + {r}/{s} = {_rational_text(value).replace(' ', '')}.", is_true)
    if kind == "rat_mul":
        value = Fraction(p, q) * Fraction(r, s) + wrong
        return (f"{_literal(p, 'ℚ')} / {q} * ({r} / {s}) = {_rational_text(value)}",
                f"Show that {p}/{q} times {r}/{s} is {_rational_text(value).replace(' ', '')}.", is_true)
    left, right = (Fraction(p, q), Fraction(p, q) + 1) if is_true else (Fraction(p, q) + 1, Fraction(p, q))
    return (f"{_literal(left.numerator, 'ℚ')} / {left.denominator} < {_rational_text(right)}",
            f"Show that {left.numerator}/{left.denominator} is less than {_rational_text(right).replace(' ', '')}.", is_true)


def generate_fragment_problems(count: int, seed: int = 0, header: str = DEFAULT_LEAN_HEADER) -> list[Problem]:
    """``count`` distinct closed arithmetic statements the stand-in decides, about one in eight false.

    Named ``frag_0001``…; the warm start's seed gives none of the demo promptset's goals (a test
    checks it), so a model fine-tuned on them and then trained with RL on the demo promptset is
    tried on new statements.
    """
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    rng = random.Random(seed)
    problems: list[Problem] = []
    seen_goals: set[str] = set()
    attempts = 0
    while len(problems) < count:
        attempts += 1
        if attempts > count * 50:
            raise ValueError(f"could not make {count} distinct statements; ask for fewer")
        goal, informal, _ = _generated_statement(rng)
        if goal in seen_goals:
            continue
        seen_goals.add(goal)
        number = len(problems) + 1
        problems.append(Problem(
            problem_id=f"frag_{number:04d}", formal_statement=f"theorem frag_{number:04d} : {goal} := by",
            informal_statement=informal, name=f"frag_{number:04d}", header=header, source=GENERATED_SOURCE,
        ))
    return problems


# --- the answers ---------------------------------------------------------------------------------


def _number_type(problem: Problem) -> str:
    statement = problem.formal_statement
    for type_name in ("ℚ", "ℤ", "ℕ"):
        if f": {type_name})" in statement:
            return type_name
    return "ℕ"


_WHY = {
    "decide": "Every number here is a natural-number literal, so the claim is decidable and `decide` evaluates it.",
    "norm_num": "Only numerals in {type} occur, so `norm_num` can evaluate both sides.",
    "omega": "This is linear arithmetic on literals in {type}, which `omega` decides.",
    "simp": "`simp` normalises arithmetic on natural-number literals, so it should close this.",
    "rfl": "Both sides compute to the same natural number, so `rfl` should close it.",
}


def _answer(problem: Problem, opening: str, body_lines: Sequence[str], closing: str, style: AnswerStyle) -> str:
    body = "\n".join(f"  {line}" for line in body_lines)
    first_try = "\n".join(body_lines)
    if style is AnswerStyle.BRIEF:
        return (
            f"<think>\n{opening}\n```tactics\n{first_try}\n```\n</think>\n"
            f"```lean4\n{problem.formal_statement}\n{body}\n```"
        )
    return (
        "<think>\n"
        f"{opening}\n"
        f"```tactics\n{first_try}\n```\n"
        f"{closing} The whole proof:\n"
        f"```tactics\n{problem.formal_statement}\n{body}\n```\n"
        "</think>\n"
        f"```lean4\n{problem.formal_statement}\n{body}\n```"
    )


def _single_tactic_answer(problem: Problem, tactic: str, style: AnswerStyle) -> str:
    return _answer(problem, _WHY[tactic].format(type=_number_type(problem)), [tactic], "That closes the goal.", style)


def _double_tactic_answer(problem: Problem, first: str, second: str, style: AnswerStyle) -> str:
    # The flaw a prover's first try often has: a second tactic after the goal is already closed.
    opening = f"{_WHY[first].format(type=_number_type(problem))} To be safe I follow it with `{second}`."
    return _answer(problem, opening, [first, second], "Both tactics run.", style)


def _false_statement_answer(problem: Problem, style: AnswerStyle) -> str:
    opening = "Evaluating both sides, they seem to differ, so this may be false; `norm_num` will tell."
    return _answer(problem, opening, ["norm_num"], "If it is false, this fails.", style)


def standin_verdict(problem: Problem, proof_body: str) -> ExpectedVerdict | None:
    """What the stand-in says of header + statement + ``proof_body``: VALID, LEAN_ERROR, or None
    where it cannot decide (such a demonstration would only ever be censored)."""
    try:
        response = decide_snippet(str(build_checked_code(problem, proof_body)))
    except CannotDecide:
        return None
    is_rejected = bool(response.get("sorries")) or any(
        message.get("severity") == "error" for message in response.get("messages", [])
    )
    return ExpectedVerdict.LEAN_ERROR if is_rejected else ExpectedVerdict.VALID


_FORMAT_CHECKS = {
    AnswerStyle.FULL: RewardConfig(),  # the release's checks, as the h100x8 preset runs them
    AnswerStyle.BRIEF: RewardConfig(min_tactic_blocks=None, min_tactics_lean4_match=None),  # the cpu-demo preset's
}


def _candidate(problem: Problem, response: str, style: AnswerStyle) -> Demonstration | None:
    """The answer with its stand-in verdict, or None where the stand-in cannot decide it."""
    format_check = check_format(response, problem, _FORMAT_CHECKS[style])
    if not format_check.is_valid:
        # Our own template broke the recipe's format: a bug here, never a demonstration to train on.
        raise AssertionError(f"generated answer for {problem.problem_id} fails the format check: {format_check.detail}")
    verdict = standin_verdict(problem, format_check.proof_body)
    if verdict is None:
        return None
    return Demonstration(problem, response, format_check.proof_body, verdict)


def demonstrations_for(
    problems: Iterable[Problem],
    per_problem: int = 2,
    flawed_share: float = 0.25,
    seed: int = 0,
    closing_tactics: Sequence[str] = CLOSING_TACTICS,
    style: AnswerStyle = AnswerStyle.FULL,
) -> list[Demonstration]:
    """``per_problem`` answers for each problem the stand-in decides; problems outside it are skipped.

    True statements get a closing tactic drawn from those the stand-in accepts, or, with
    probability ``flawed_share``, a proof that Lean rejects (a tactic that cannot close this
    statement, or a closing tactic followed by a second one). False statements get an honest
    attempt that fails. ``closing_tactics`` limits the tactics tried (fewer choices: less for
    a small model to learn).
    """
    style = AnswerStyle(style)
    unknown = set(closing_tactics) - set(CLOSING_TACTICS)
    if unknown or not closing_tactics:
        raise ValueError(f"closing_tactics must be some of {', '.join(CLOSING_TACTICS)}, got {list(closing_tactics)}")
    if per_problem < 1:
        raise ValueError(f"per_problem must be at least 1, got {per_problem}")
    if not 0.0 <= flawed_share <= 1.0:
        raise ValueError(f"flawed_share must be between 0 and 1, got {flawed_share}")
    rng = random.Random(seed)
    demonstrations: list[Demonstration] = []
    for problem in problems:
        single_tactic = [
            demonstration for tactic in closing_tactics
            if (demonstration := _candidate(problem, _single_tactic_answer(problem, tactic, style), style)) is not None
        ]
        closing = [d for d in single_tactic if d.expected_verdict is ExpectedVerdict.VALID]
        wrong_tactic = [d for d in single_tactic if d.expected_verdict is ExpectedVerdict.LEAN_ERROR]
        if not closing:
            attempt = _candidate(problem, _false_statement_answer(problem, style), style)
            if attempt is not None and attempt.expected_verdict is ExpectedVerdict.LEAN_ERROR:
                demonstrations.extend([attempt] * per_problem)
            continue  # outside the fragment: nothing the stand-in would score
        accepted_tactics = [demonstration.proof_body.strip() for demonstration in closing]
        flawed = wrong_tactic + [
            demonstration for first in accepted_tactics for second in accepted_tactics
            if (demonstration := _candidate(problem, _double_tactic_answer(problem, first, second, style), style)) is not None
            and demonstration.expected_verdict is ExpectedVerdict.LEAN_ERROR
        ]
        for _ in range(per_problem):
            pool = flawed if flawed and rng.random() < flawed_share else closing
            demonstrations.append(rng.choice(pool))
    return demonstrations


def write_demonstrations(demonstrations: Iterable[Demonstration], path: str | Path) -> int:
    """JSON lines (``formal_statement`` + ``response`` rows, with the prompt's other fields); returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as out:
        for demonstration in demonstrations:
            out.write(json.dumps(demonstration.to_row(), ensure_ascii=False) + "\n")
            count += 1
    return count
