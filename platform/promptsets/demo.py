"""The demo promptset: closed arithmetic that the stand-in Lean server decides honestly.

Every statement lies in the stand-in's fragment (numerals in ℕ, ℤ and ℚ with + - * / ^ %,
= ≠ < ≤, ∧ ∨ ¬), so a CPU-only run gets real, uncensored rewards. Most are true; some need
``norm_num`` because ``decide`` only evaluates in ℕ; three are false, so a reward of 1 is
not free. Pure data (no Django): the trainer's demo and the tests import it too.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.recipe.problems import DEFAULT_LEAN_HEADER

DEMO_PROMPTSET_NAME = "Demo: closed arithmetic"
SMOKE_PROMPTSET_NAME = "Smoke: four problems the cpu-smoke model knows"
DEMO_HEADER = DEFAULT_LEAN_HEADER  # the trainer's, kept in one place
DEMO_SOURCE = "demo"


@dataclass(frozen=True)
class DemoProblem:
    key: str
    formal_statement: str
    informal_statement: str
    is_true: bool
    closing_tactic: str | None  # a tactic that closes it in Lean (None: false, nothing does)

    def as_row(self) -> dict:
        return {"statement_id": self.key, "formal_statement": self.formal_statement,
                "natural_language": self.informal_statement, "header": DEMO_HEADER, "source": DEMO_SOURCE}


def _problem(key: str, goal: str, informal: str, tactic: str | None) -> DemoProblem:
    return DemoProblem(key, f"theorem {key} : {goal} := by", informal, tactic is not None, tactic)


DEMO_PROBLEMS: tuple[DemoProblem, ...] = (
    _problem("demo_add", "(2 : ℕ) + 3 = 5", "Show that 2 + 3 = 5 in the natural numbers.", "decide"),
    _problem("demo_mul", "(6 : ℕ) * 7 = 42", "Show that 6 times 7 is 42.", "decide"),
    _problem("demo_pow", "(2 : ℕ) ^ 10 = 1024", "Show that 2 to the power 10 is 1024.", "norm_num"),
    _problem("demo_sub_truncates", "(3 : ℕ) - 5 = 0",
             "Show that subtracting 5 from 3 in the natural numbers gives 0 (subtraction stops at zero).", "decide"),
    _problem("demo_nat_div", "(17 : ℕ) / 5 = 3", "Show that 17 divided by 5, rounded down, is 3.", "decide"),
    _problem("demo_nat_mod", "(17 : ℕ) % 5 = 2", "Show that 17 leaves remainder 2 when divided by 5.", "decide"),
    _problem("demo_ne", "(7 : ℕ) ≠ 8", "Show that 7 is not equal to 8.", "decide"),
    _problem("demo_lt", "(12 : ℕ) < 3 * 5", "Show that 12 is less than 3 times 5.", "decide"),
    _problem("demo_le", "(2 : ℕ) ^ 5 ≤ 32", "Show that 2 to the fifth is at most 32.", "decide"),
    _problem("demo_and", "(2 : ℕ) + 2 = 4 ∧ (3 : ℕ) * 3 = 9", "Show that 2 + 2 = 4 and 3 · 3 = 9.", "decide"),
    _problem("demo_or", "(5 : ℕ) < 3 ∨ (5 : ℕ) % 2 = 1", "Show that 5 is less than 3 or 5 is odd.", "decide"),
    _problem("demo_not", "¬ ((10 : ℕ) % 3 = 0)", "Show that 10 is not divisible by 3.", "decide"),
    _problem("demo_int_sub", "(3 : ℤ) - 5 = -2", "Show that 3 − 5 = −2 in the integers.", "norm_num"),
    _problem("demo_int_mul_neg", "(-4 : ℤ) * 6 = -24", "Show that −4 times 6 is −24.", "norm_num"),
    _problem("demo_int_pow", "(-2 : ℤ) ^ 3 = -8", "Show that (−2)³ = −8.", "norm_num"),
    _problem("demo_int_lt", "(-3 : ℤ) < 2", "Show that −3 is less than 2.", "norm_num"),
    _problem("demo_rat_add", "(1 : ℚ) / 2 + 1 / 3 = 5 / 6", "Show that 1/2 + 1/3 = 5/6.", "norm_num"),
    _problem("demo_rat_lt", "(3 : ℚ) / 4 < 1", "Show that 3/4 is less than 1.", "norm_num"),
    _problem("demo_rat_mul", "(2 : ℚ) / 3 * (9 / 4) = 3 / 2", "Show that 2/3 times 9/4 is 3/2.", "norm_num"),
    _problem("demo_rat_ne", "(1 : ℚ) / 3 ≠ 1 / 4", "Show that 1/3 is not equal to 1/4.", "norm_num"),
    _problem("demo_rat_le", "(7 : ℚ) / 8 ≤ 8 / 9", "Show that 7/8 is at most 8/9.", "norm_num"),
    _problem("demo_false_add", "(2 : ℕ) + 2 = 5", "Show that 2 + 2 = 5. (False: no proof exists.)", None),
    _problem("demo_false_lt", "(10 : ℤ) < -10", "Show that 10 is less than −10. (False: no proof exists.)", None),
    _problem("demo_false_rat", "(1 : ℚ) / 2 + 1 / 2 = 2", "Show that 1/2 + 1/2 = 2. (False: no proof exists.)", None),
)
