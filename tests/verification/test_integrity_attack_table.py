"""Our table of attacks on the reward: each proof body earns nothing, and says why.

Keep it growing: every new trick a policy finds gets a row here before its fix.
"""

import pytest

from trainer.config import RewardConfig
from trainer.verification.integrity import check_integrity, disallowed_axioms, parse_axioms_report

STRICT = RewardConfig()
NATIVE_ALLOWED = RewardConfig(allow_native_decide=True)

# (name, proof body, a phrase the reason must contain)
ATTACKS = [
    ("plain sorry", "\n  sorry", "sorry"),
    ("sorry after real work", "\n  norm_num\n  all_goals sorry", "sorry"),
    ("admit", "\n  admit", "admit"),
    ("sorryAx by name", "\n  exact sorryAx _ false", "sorryAx"),
    ("stop abandons the proof", "\n  stop\n  norm_num", "stop"),
    ("sorry hidden in a «quoted» name", "\n  exact «sorry»", "sorry"),
    ("a new axiom after the proof", "\n  exact h\naxiom h : 2 + 2 = 5", "axiom"),
    ("a private axiom", "\n  trivial\nprivate axiom cheat : False", "axiom"),
    ("unsafe definition", "\n  trivial\nunsafe def f : ℕ := 1", "unsafe"),
    ("unsafeCast", "\n  exact unsafeCast ()", "unsafe"),
    ("implemented_by", "\n  trivial\n@[implemented_by g] def f : Bool := true", "implemented_by"),
    ("extern", "\n  trivial\n@[extern \"c_f\"] opaque f : Nat", "string literal"),
    ("extern without a string", "\n  trivial\nattribute [extern c_f] f", "extern"),
    ("kernel check switched off", "\n  set_option debug.skipKernelTC true in\n  decide", "debug.skipKernelTC"),
    ("an unknown option", "\n  set_option pp.all true in\n  norm_num", "pp.all"),
    ("#eval runs code", "\n  norm_num\n#eval IO.println 1", "#"),
    ("#exit hides the axioms query", "\n  norm_num\n#exit", "#"),
    ("#print the axioms ourselves", "\n  norm_num\n#print axioms two_plus_two", "#"),
    ("run_cmd", "\n  norm_num\nrun_cmd pure ()", "run_cmd"),
    ("run_tac", "\n  run_tac Lean.Elab.Tactic.evalTactic default", "run_tac"),
    ("by_elab", "\n  exact by_elab pure default", "by_elab"),
    ("IO action", "\n  have := IO.getStdout\n  norm_num", "IO"),
    ("elaborator internals", "\n  exact Lean.Elab.admitGoal", "Lean.Elab"),
    ("an import", "\n  norm_num\nimport Mathlib.Tactic", "import"),
    ("native_decide", "\n  native_decide", "native_decide"),
    ("ofReduceBool by hand", "\n  exact Lean.ofReduceBool _ _ rfl", "ofReduceBool"),
    ("a second theorem", "\n  norm_num\ntheorem helper : 1 = 1 := rfl", "theorem"),
    ("a namespace that shadows the checked name", "\n  norm_num\nnamespace Evil", "namespace"),
    ("a bare open", "\n  norm_num\nopen Evil", "open"),
    ("a macro that hides sorry", "\n  cheat\nmacro \"cheat\" : tactic => `(tactic| sorry)", "string literal"),
    ("a macro without strings", "\n  norm_num\nmacro_rules | `(tactic| trivial) => `(tactic| norm_num)", "macro_rules"),
    ("notation", "\n  norm_num\nnotation:50 a \" ≈ \" b => a = b", "string literal"),
    ("an instance", "\n  norm_num\ninstance : Inhabited False := ⟨by assumption⟩", "instance"),
    ("an attribute", "\n  norm_num\nattribute [simp] Nat.add_comm", "attribute"),
    ("an unterminated comment swallows the axioms query", "\n  norm_num\n/- everything after is a comment", "unterminated comment"),
    ("an unterminated «name»", "\n  exact «oops", "unterminated"),
    ("a string literal", "\n  exact (\"x\" : String).length", "string literal"),
    ("a control character", "\n  norm_num\x00", "control characters"),
    ("a line separator the server turns into a newline", "\n  norm_num -- done\u2028  sorry", "line breaks"),
    ("a lone carriage return", "\n  norm_num -- done\r  sorry", "line breaks"),
    ("a form feed", "\n  norm_num -- done\x0c  sorry", "line breaks"),
    ("a nested comment ends early only for a naive scanner", "\n  /- /- -/ sorry -/ norm_num\n  sorry", "sorry"),
    ("the character after an opener opens nothing, as in Lean", "\n  norm_num /-/- -/ sorry", "sorry"),
    ("a doc-comment opener does not close itself, as in Lean", "\n  norm_num\n/--/ the rest would be a comment", "unterminated comment"),
]


@pytest.mark.parametrize("name, body, phrase", ATTACKS, ids=[row[0] for row in ATTACKS])
def test_every_attack_in_the_table_is_rejected_with_its_reason(name, body, phrase):
    reasons = check_integrity(body, STRICT)
    assert reasons, f"attack {name!r} was not caught"
    assert any(phrase in reason for reason in reasons), f"attack {name!r}: {phrase!r} not in {reasons}"


CLEAN_BODIES = [
    "\n  norm_num",
    "\n  -- no sorry here: the comment mentions it, the proof does not\n  norm_num",
    "\n  /- a block comment with admit and axiom in it -/\n  decide",
    "\n  set_option maxHeartbeats 400000 in\n  nlinarith [sq_nonneg (a - b), sq_nonneg (a + b)]",
    "\n  have h' : (2 : ℕ) ≤ 3 := by norm_num\n  exact Nat.le_of_lt_succ (by omega)",
    "\n  open Real in\n  simp [Real.sqrt_eq_iff]",
    "\n  rcases h with ⟨x, hx⟩\n  exact ⟨x, by linarith [hx]⟩",
    "\n  simp only [Finset.sum_range_succ, #[1, 2].size]",
    "\n  have hadmit : Nat.sorryish = 1 := rfl",
    "\n  exact Classical.axiom_of_choice_is_fine_here",
    "\r\n  norm_num\r\n  -- Windows line endings\r\n",
]


@pytest.mark.parametrize("body", CLEAN_BODIES)
def test_an_honest_proof_body_passes_the_integrity_rules(body):
    assert check_integrity(body, STRICT) == []


def test_native_decide_passes_only_when_the_run_allows_it():
    assert check_integrity("\n  native_decide", NATIVE_ALLOWED) == []
    assert check_integrity("\n  native_decide", STRICT)


def test_only_the_standard_three_axioms_are_accepted():
    assert disallowed_axioms(["propext", "Classical.choice", "Quot.sound"], allow_native_decide=False) == []
    assert disallowed_axioms(["propext", "sorryAx"], allow_native_decide=False) == ["sorryAx"]
    assert disallowed_axioms(["cheat"], allow_native_decide=False) == ["cheat"]
    assert disallowed_axioms(["Lean.ofReduceBool"], allow_native_decide=False) == ["Lean.ofReduceBool"]
    assert disallowed_axioms(["Lean.ofReduceBool"], allow_native_decide=True) == []


def test_it_reads_both_forms_of_leans_axioms_report():
    assert parse_axioms_report("'t' depends on axioms: [propext, Classical.choice, Quot.sound]") == (
        "t", ["propext", "Classical.choice", "Quot.sound"],
    )
    assert parse_axioms_report("'t' does not depend on any axioms") == ("t", [])
    assert parse_axioms_report("unknown constant 't'") is None
