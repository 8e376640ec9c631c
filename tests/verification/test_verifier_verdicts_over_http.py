"""Every verdict category, from the stand-in server over real HTTP."""

from trainer.verification.client import interpret_answer as _interpret_answer
from trainer.verification.kimina_compat import ReplResponse
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.verdicts import Verdict


def test_a_proof_the_stand_in_accepts_is_valid_and_marked_as_the_stand_ins(standin, helpers):
    [result], stats = helpers.verify(standin.url, [helpers.checked("\n  norm_num")])
    assert result.verdict is Verdict.VALID
    assert result.is_standin_verdict
    assert result.extra["axioms"] == ["propext", "Classical.choice", "Quot.sound"]
    assert any("[lean-standin]" in message.text for message in result.messages)
    assert stats["standin_verdicts"] == 1


def test_sorry_is_its_own_verdict(standin, helpers):
    [result], _ = helpers.verify(standin.url, [helpers.checked("\n  sorry")])
    assert result.verdict is Verdict.SORRY
    assert "sorry" in result.reasons[0]


def test_a_wrong_tactic_is_a_lean_error_with_its_message_at_the_true_line(standin, helpers):
    code = helpers.checked("\n  norm_num\n  decide")
    [result], _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.LEAN_ERROR
    [error] = result.errors
    assert (error.line, error.column, error.end_line, error.end_column) == (code.body_line + 1, 2, code.body_line + 1, 8)
    assert code.split("\n")[error.line - 1].strip() == "decide"
    assert error.text == "no goals to be proved"


def test_a_false_statement_is_a_lean_error(standin, helpers):
    code = helpers.checked("\n  decide", statement="theorem wrong : (2 : ℕ) + 2 = 5 := by")
    [result], _ = helpers.verify(standin.url, [code])
    assert result.verdict is Verdict.LEAN_ERROR
    assert "is false" in result.errors[0].text


def test_the_stand_ins_cannot_decide_is_a_censored_infra_error(standin, helpers):
    [result], stats = helpers.verify(standin.url, [helpers.checked("\n  linarith")])
    assert result.verdict is Verdict.INFRA_ERROR
    assert result.is_censored and result.is_standin_verdict
    assert "cannot decide" in result.reasons[0]
    assert stats["censored"] == 1


def test_a_lean_timeout_is_the_proofs_fault_not_censored(fresh_standin, helpers):
    # Longer than the 1 s Lean timeout below, from the first proof on (the probe comes before it).
    [result], _ = helpers.verify(
        fresh_standin.url, [helpers.checked("\n  norm_num")], timeout_s=1.0,
        after_probe=lambda: setattr(fresh_standin.app.settings, "latency_s", 2.0),
    )
    assert result.verdict is Verdict.TIMEOUT
    assert not result.is_censored
    assert result.system_error == "Lean REPL command timed out in 1.0 seconds"


def test_a_timeout_loading_the_imports_is_censored(helpers):
    header_timeout = ReplResponse(id="x", error="Lean REPL header command timed out in 60.0 seconds")
    result = _interpret_answer(header_timeout, helpers.checked(" rfl"), line_numbering=LineNumbering.AS_SENT)
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored


def _answer(messages, sorries=None):
    return ReplResponse(id="x", response={"messages": messages, "sorries": sorries or []})


def _axioms_message(code, text):
    return {"severity": "info", "pos": {"line": code.axioms_line - code.import_line_count, "column": 0}, "data": text}


def interpret_answer(response, code, **options):
    """The 2.0.0 image's numbering, which the hand-made answers below use."""
    return _interpret_answer(response, code, line_numbering=LineNumbering.AFTER_HEADER, **options)


def test_a_sorry_that_shows_only_as_the_warning_is_still_sorry(helpers):
    code = helpers.checked("\n  sorry")
    for quoted in ("declaration uses 'sorry'", "declaration uses `sorry`", "declaration uses sorry"):
        warning = {"severity": "warning", "pos": {"line": 5, "column": 8}, "data": quoted}
        assert interpret_answer(_answer([warning]), code).verdict is Verdict.SORRY


def test_non_standard_axioms_reject_a_proof_lean_accepted(helpers):
    code = helpers.checked("\n  norm_num")
    result = interpret_answer(_answer([_axioms_message(code, "'two_plus_two' depends on axioms: [propext, cheat]")]), code)
    assert result.verdict is Verdict.REJECTED
    assert "cheat" in result.reasons[0]
    native = _answer([_axioms_message(code, "'two_plus_two' depends on axioms: [Lean.ofReduceBool]")])
    assert interpret_answer(native, code).verdict is Verdict.REJECTED
    assert interpret_answer(native, code, allow_native_decide=True).verdict is Verdict.VALID


def test_a_missing_or_misplaced_axioms_report_rejects_the_proof(helpers):
    code = helpers.checked("\n  norm_num")
    assert interpret_answer(_answer([]), code).verdict is Verdict.REJECTED
    elsewhere = {"severity": "info", "pos": {"line": 5, "column": 0}, "data": "'two_plus_two' does not depend on any axioms"}
    assert interpret_answer(_answer([elsewhere]), code).verdict is Verdict.REJECTED
    other_name = _axioms_message(code, "'decoy' does not depend on any axioms")
    assert interpret_answer(_answer([other_name]), code).verdict is Verdict.REJECTED


def test_a_repl_level_error_is_a_censored_infra_error(helpers):
    result = interpret_answer(ReplResponse(id="x", response={"message": "unknown environment"}), helpers.checked(" rfl"))
    assert result.verdict is Verdict.INFRA_ERROR and result.is_censored
