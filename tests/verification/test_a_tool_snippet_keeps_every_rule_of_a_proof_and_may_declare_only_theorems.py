"""A Lean snippet the model asks about inside its reasoning (rollout.lean_tool_calls) keeps the rules of a final
proof, from their one home (trainer/verification/integrity.py): every attack of the proof table is refused as a
snippet too, except declaring a theorem, which is what a snippet is. What only a snippet needs: a length bound."""

import pytest

from tests.verification.test_integrity_attack_table import ATTACKS
from trainer.config import RewardConfig
from trainer.verification.integrity import (
    MAX_SNIPPET_CHARACTERS,
    SNIPPET_DECLARATION_KEYWORDS,
    check_integrity,
    check_snippet_integrity,
)

STRICT = RewardConfig()
TRIED_THEOREM = "theorem try_it : (1 : ℚ) / 2 + 1 / 2 = 1 := by\n  norm_num"


@pytest.mark.parametrize("name, body, phrase", [a for a in ATTACKS if a[0] != "a second theorem"],
                         ids=[a[0] for a in ATTACKS if a[0] != "a second theorem"])
def test_every_attack_on_a_proof_is_refused_in_a_snippet_for_the_same_reason(name, body, phrase):
    snippet = TRIED_THEOREM + body
    reasons = check_snippet_integrity(snippet, STRICT)
    assert any(phrase in reason for reason in reasons), reasons
    assert set(reasons) <= set(check_integrity(snippet, STRICT))  # no reason of its own: one home for the rules


@pytest.mark.parametrize("keyword", sorted(SNIPPET_DECLARATION_KEYWORDS))
def test_a_snippet_may_declare_what_it_tries(keyword):
    name = "" if keyword == "example" else " try_it"
    assert check_snippet_integrity(f"{keyword}{name} : (2 : ℕ) + 2 = 4 := by\n  norm_num", STRICT) == []


def test_a_snippet_may_hold_two_tries_and_comments():
    snippet = f"-- first the lemma\n{TRIED_THEOREM}\n\nexample : (3 : ℕ) * 3 = 9 := by\n  decide"
    assert check_snippet_integrity(snippet, STRICT) == []


@pytest.mark.parametrize("declaration", ["def helper : ℕ := 3", "instance : Inhabited False := ⟨by assumption⟩",
                                         "namespace Evil", "abbrev N := ℕ"])
def test_other_declarations_stay_refused_as_in_a_proof(declaration):
    keyword = declaration.split()[0]
    reasons = check_snippet_integrity(f"{declaration}\n{TRIED_THEOREM}", STRICT)
    assert any(f"'{keyword}'" in reason for reason in reasons), reasons


def test_the_issue_s_shell_command_is_refused():
    snippet = '#eval IO.Process.run {cmd := "sh", args := #["-c", "id > /tmp/pwned"]}'
    assert check_snippet_integrity(snippet, STRICT)


def test_a_snippet_longer_than_the_bound_is_refused_saying_the_bound_and_what_to_do():
    snippet = TRIED_THEOREM + "\n" + "-- padding\n" * (MAX_SNIPPET_CHARACTERS // 10)
    [reason] = check_snippet_integrity(snippet, STRICT)
    assert f"{len(snippet)} characters" in reason and f"at most {MAX_SNIPPET_CHARACTERS}" in reason
    assert "one declaration at a time" in reason
    assert check_snippet_integrity(snippet[:MAX_SNIPPET_CHARACTERS], STRICT) == []


def test_native_decide_follows_the_runs_reward_setting_as_for_proofs():
    snippet = "theorem t : 2 + 2 = 4 := by\n  native_decide"
    assert check_snippet_integrity(snippet, STRICT)
    assert check_snippet_integrity(snippet, RewardConfig(allow_native_decide=True)) == []
