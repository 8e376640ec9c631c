"""The proof viewer says true things about where Lean's messages are and about training (issue 45):

- Lean's lines are lines of the code Lean checked (the trainer's verifier stores them so, and the page's listing is
  that code, numbered), so the page no longer says they are "counted after the import lines";
- a card shows the model's own code block, unnumbered and without our header, so its "error at 9:2" beside a
  two-line block says which code the 9 counts;
- a censored answer is not trained on, so its page does not say "trained on at step 2"."""

import pytest

pytestmark = pytest.mark.django_db

CHECKED = "import Mathlib\nimport Aesop\n\ntheorem add_small : (2 : ℕ) + 3 = 5 := by\n  simp\n\n#print axioms add_small\n"
MESSAGE = {"severity": "error", "line": 5, "column": 2, "end_line": 5, "end_column": 6, "text": "simp made no progress"}


def test_a_message_is_placed_on_the_line_of_the_checked_code_and_said_to_be_there(make_run, make_attempt, alice, logged_in):
    attempt = make_attempt(make_run(), step=2, checked_code=CHECKED, lean_messages=[MESSAGE])
    page = logged_in(alice).get(f"/proofs/{attempt.pk}/").content.decode()
    assert "counted after the import lines" not in page
    assert "error at line 5, column 2 of the code Lean checked (the numbered listing above)" in page
    assert CHECKED.splitlines()[5 - 1] == "  simp"  # the listing's line 5, where the message is drawn


def test_a_card_says_which_code_its_lean_line_counts(make_run, make_attempt, alice, logged_in):
    run = make_run()
    make_attempt(run, step=2, checked_code=CHECKED, lean_messages=[MESSAGE], lean_code="theorem add_small : (2 : ℕ) + 3 = 5 := by\n  simp")
    page = logged_in(alice).get(f"/runs/{run.pk}/").content.decode()
    assert "error at line 5:2 of the code Lean checked (its page numbers it): simp made no progress" in page


def test_a_censored_answer_is_not_said_to_be_trained_on(make_run, make_attempt, alice, logged_in):
    run = make_run()
    run.step_metrics.create(step=2, values={"rollout/policy_version": 2})
    censored = make_attempt(run, step=2, verdict="infra_error", reward=None, is_censored=True, policy_version=2,
                            lean_messages=[], reasons=["the stand-in Lean server cannot decide this proof"])
    scored = make_attempt(run, step=2, policy_version=2)
    client = logged_in(alice)
    censored_page = client.get(f"/proofs/{censored.pk}/").content.decode()
    assert "trained on at step" not in censored_page
    assert "censored, so not trained on" in censored_page
    assert "trained on at step 2" in client.get(f"/proofs/{scored.pk}/").content.decode()
