"""The first-attempt prompt is the release's prepare_data.py template, byte for byte: three
problems, each expected text typed out by hand from that template."""

from __future__ import annotations

from trainer.recipe.problems import Problem
from trainer.recipe.prompts import SYSTEM_PROMPT, first_attempt_messages

HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"


def user_turn(problem: Problem) -> str:
    system, user = first_attempt_messages(problem)
    assert system == {"role": "system", "content": "You are an expert in mathematics and proving theorems in Lean 4."}
    assert SYSTEM_PROMPT == system["content"]
    assert user["role"] == "user"
    return user["content"]


def test_a_minif2f_problem_with_the_default_header():
    problem = Problem(
        "mathd_algebra_10",
        "theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by",
        informal_statement="What is $\\left|120\\% \\cdot 30 - 130\\% \\cdot 20\\right|$? Show that it is 10.",
    )
    assert user_turn(problem) == """Think about and solve the following problems step by step in Lean 4.

# Problem:
What is $\\left|120\\% \\cdot 30 - 130\\% \\cdot 20\\right|$? Show that it is 10.

# Formal Statement:
```lean4
import Mathlib
import Aesop

set_option maxHeartbeats 400000

open BigOperators Real Nat Topology Rat

theorem mathd_algebra_10 : abs ((120 : ℝ) / 100 * 30 - 130 / 100 * 20) = 10 := by
```
"""


def test_a_two_line_statement_with_braces_and_a_header_of_its_own():
    problem = Problem(
        "set_card",
        "theorem set_card (S : Finset ℕ) (h₀ : S = {n | n < 5}) :\n    S.card = 5 := by",
        informal_statement="Let $S = \\{n : n < 5\\}$. Show that $|S| = 5$.",
        header="import Mathlib\n",
    )
    assert user_turn(problem) == (
        "Think about and solve the following problems step by step in Lean 4.\n"
        "\n"
        "# Problem:\n"
        "Let $S = \\{n : n < 5\\}$. Show that $|S| = 5$.\n"
        "\n"
        "# Formal Statement:\n"
        "```lean4\n"
        "import Mathlib\n"
        "theorem set_card (S : Finset ℕ) (h₀ : S = {n | n < 5}) :\n"
        "    S.card = 5 := by\n"
        "```\n"
    )


def test_a_problem_without_an_informal_statement_keeps_the_empty_problem_line():
    problem = Problem("two_add_two", "theorem two_add_two : (2 : ℕ) + 2 = 4 := by", header="")
    assert user_turn(problem) == (
        "Think about and solve the following problems step by step in Lean 4.\n\n"
        "# Problem:\n\n\n"
        "# Formal Statement:\n```lean4\ntheorem two_add_two : (2 : ℕ) + 2 = 4 := by\n```\n"
    )
