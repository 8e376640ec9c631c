"""Answer text in the recipe's shape, shared by the recipe tests."""

from __future__ import annotations

STATEMENT = "theorem sum_sq_nonneg (a b : ℝ) (h₀ : 0 ≤ a)\n    (h₁ : 0 ≤ b) : 0 ≤ a ^ 2 + b ^ 2 := by"

VALID_REASONING = (
    "\nWe need a sum of two squares to be nonnegative.\n"
    "Each square is nonnegative, so positivity should close it.\n"
    "```tactics\n"
    "theorem sum_sq_nonneg (a b : ℝ) (h₀ : 0 ≤ a)\n"
    "    (h₁ : 0 ≤ b) : 0 ≤ a ^ 2 + b ^ 2 := by\n"
    "  positivity\n"
    "```\n"
    "If positivity failed, nlinarith with the two squares would do.\n"
    "```tactics\n"
    "  nlinarith [sq_nonneg a, sq_nonneg b]\n"
    "```\n"
)

VALID_LEAN_CODE = STATEMENT + "\n  positivity"


def make_answer(reasoning: str = VALID_REASONING, lean_code: str = VALID_LEAN_CODE, between: str = "\nSo positivity it is.\n", after: str = "") -> str:
    """An answer in the recipe's shape: <think>reasoning</think>, a conclusion, one lean4 block."""
    return f"<think>{reasoning}</think>{between}```lean4\n{lean_code}\n```{after}"
