"""A Lean error's reason, and the one-line quote of it on the group page, say what Lean could not do: Lean often ends
its message's first line with a colon and says the rest on the next ("omega could not prove the goal:" then "No
usable constraints found for the atoms."), so the first line alone read "could not prove the goal:" and nothing
after it (issue 45). The message here is the stand-in Lean server's copy of Lean's own (a stand-in, named so)."""

import pytest

from trainer.verification.checked_code import CheckedCode
from trainer.verification.client import interpret_answer
from trainer.verification.kimina_compat import ReplResponse
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin import OMEGA_NO_FACTS
from trainer.verification.verdicts import MAX_ONE_LINE_CHARACTERS, Verdict, lean_text_in_one_line

pytestmark = pytest.mark.django_db

CODE = CheckedCode("import Mathlib\n\ntheorem no_facts (x y : ℝ) : x * y = y * x := by\n  omega\n")


def lean_says(text: str) -> ReplResponse:
    return ReplResponse(id="replayed", time=0.2, response={"env": 0, "messages": [
        {"severity": "error", "pos": {"line": 4, "column": 2}, "endPos": {"line": 4, "column": 7}, "data": text}]})


def test_the_reason_of_a_lean_error_quotes_the_whole_message_on_one_line():
    result = interpret_answer(lean_says(OMEGA_NO_FACTS), CODE, line_numbering=LineNumbering.AS_SENT)
    assert result.verdict is Verdict.LEAN_ERROR
    assert result.reasons == ("Lean rejected the proof at line 4: omega could not prove the goal: "
                              "No usable constraints found for the atoms.",)


def test_the_group_pages_quote_of_the_first_error_says_it_too(make_run):
    from proofs.models import ProofAttempt

    attempt = ProofAttempt(run=make_run(), lean_messages=[{"severity": "error", "line": 4, "column": 2, "text": OMEGA_NO_FACTS}])
    assert attempt.first_lean_error() == "omega could not prove the goal: No usable constraints found for the atoms."


def test_a_goal_state_after_a_line_that_says_it_all_stays_out():
    assert lean_text_in_one_line("unsolved goals\nx : ℕ\n⊢ x + 0 = x") == "unsolved goals"


def test_a_long_message_is_cut_with_an_ellipsis_not_silently():
    quoted = lean_text_in_one_line("type mismatch:\n" + "h " * 400)
    assert len(quoted) <= MAX_ONE_LINE_CHARACTERS and quoted.startswith("type mismatch: h h") and quoted.endswith("…")
