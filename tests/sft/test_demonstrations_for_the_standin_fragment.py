"""Generated demonstrations have the recipe's full format, and their verdicts are the stand-in's own."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.sft.conftest import nat_sum_problems
from trainer.config import RewardConfig
from trainer.recipe.format_reward import check_format
from trainer.recipe.problems import Problem
from trainer.sft.demonstrations import (
    ExpectedVerdict,
    demonstrations_for,
    generate_fragment_problems,
    standin_verdict,
)
from trainer.verification.checked_code import build_checked_code
from trainer.verification.standin import decide_snippet


@pytest.fixture(scope="module")
def generated():
    problems = generate_fragment_problems(60, seed=3)
    return problems, demonstrations_for(problems, per_problem=2, flawed_share=0.25, seed=3)


def lean_errors(problem: Problem, proof_body: str) -> list[str]:
    response = decide_snippet(str(build_checked_code(problem, proof_body)))
    return [message["data"] for message in response["messages"] if message["severity"] == "error"]


def test_every_answer_passes_the_h100x8_format_checks_with_two_tactics_blocks(generated):
    _, demonstrations = generated
    strict = RewardConfig()  # the release's checks: two tactics blocks, 70% of the final lines tried
    assert strict.min_tactic_blocks == 2
    for demonstration in demonstrations:
        check = check_format(demonstration.response, demonstration.problem, strict)
        assert check.is_valid, (demonstration.response, check.detail)


def test_valid_demonstrations_are_accepted_by_the_standin_with_no_error(generated):
    _, demonstrations = generated
    valid = [d for d in demonstrations if d.expected_verdict is ExpectedVerdict.VALID]
    assert valid
    for demonstration in valid:
        assert lean_errors(demonstration.problem, demonstration.proof_body) == []


def test_rejected_demonstrations_get_a_real_lean_error_from_the_standin(generated):
    _, demonstrations = generated
    rejected = [d for d in demonstrations if d.expected_verdict is ExpectedVerdict.LEAN_ERROR]
    assert rejected
    messages = Counter()
    for demonstration in rejected:
        errors = lean_errors(demonstration.problem, demonstration.proof_body)
        assert errors, demonstration.proof_body
        messages[errors[0].split("\n")[0]] += 1
    assert messages["no goals to be proved"] > 0, messages  # a second tactic after the goal was closed
    assert messages["omega could not prove the goal:"] > 0, messages  # a tactic that cannot reach ℚ


def test_the_mix_holds_several_closing_tactics_and_a_share_of_flawed_proofs(generated):
    problems, demonstrations = generated
    tactics = Counter(d.proof_body.strip() for d in demonstrations if d.expected_verdict is ExpectedVerdict.VALID)
    assert {"norm_num", "decide", "omega"} <= set(tactics), tactics
    rejected_share = sum(d.expected_verdict is ExpectedVerdict.LEAN_ERROR for d in demonstrations) / len(demonstrations)
    assert 0.15 <= rejected_share <= 0.6, rejected_share
    assert len({d.problem.problem_id for d in demonstrations}) == len(problems)


def test_decide_is_never_demonstrated_outside_the_natural_numbers(generated):
    _, demonstrations = generated
    for demonstration in demonstrations:
        if "decide" in demonstration.proof_body:
            assert "ℕ" in demonstration.problem.formal_statement


def test_a_flawed_share_of_zero_gives_only_accepted_proofs_for_true_statements():
    demonstrations = demonstrations_for(nat_sum_problems([(2, 3), (4, 4)]), per_problem=6, flawed_share=0.0)
    assert {d.expected_verdict for d in demonstrations} == {ExpectedVerdict.VALID}


def test_a_false_statement_gets_an_attempt_that_lean_rejects():
    false = Problem("f", "theorem f : (2 : ℕ) + 2 = 5 := by")
    (demonstration,) = demonstrations_for([false], per_problem=1)
    assert demonstration.expected_verdict is ExpectedVerdict.LEAN_ERROR
    assert lean_errors(false, demonstration.proof_body)


def test_statements_outside_the_fragment_get_no_demonstrations():
    outside = Problem("x", "theorem x (a b : ℝ) (h : 0 ≤ a) : 0 ≤ a + b ^ 2 - b ^ 2 := by")
    assert standin_verdict(outside, "nlinarith [sq_nonneg b]") is None
    assert demonstrations_for([outside]) == []


def test_the_demo_promptset_statements_all_get_demonstrations_but_none_is_generated_again():
    from promptsets.demo import DEMO_HEADER, DEMO_PROBLEMS

    demo = [Problem(p.key, p.formal_statement, p.informal_statement, header=DEMO_HEADER) for p in DEMO_PROBLEMS]
    assert {d.problem.problem_id for d in demonstrations_for(demo, per_problem=1)} == {p.problem_id for p in demo}
    demo_goals = {p.formal_statement.split(" : ", 1)[1] for p in demo}
    generated_goals = {p.formal_statement.split(" : ", 1)[1] for p in generate_fragment_problems(200, seed=7)}
    assert len(generated_goals) == 200
    assert not demo_goals & generated_goals


def test_a_row_keeps_what_the_rl_prompt_is_built_from():
    (demonstration,) = demonstrations_for(nat_sum_problems([(2, 3)]), per_problem=1)
    row = demonstration.to_row()
    assert Problem.from_dict(row) == demonstration.problem
    assert row["response"].startswith("<think>") and row["expected_verdict"] in {"valid", "lean_error"}


def test_brief_answers_pass_the_cpu_demo_checks_but_not_the_h100x8_ones():
    from trainer.config import RunConfig
    from trainer.sft.demonstrations import AnswerStyle

    (demonstration,) = demonstrations_for(nat_sum_problems([(2, 3)]), per_problem=1, style=AnswerStyle.BRIEF)
    cpu_demo = RunConfig.from_preset("cpu-demo").reward
    assert check_format(demonstration.response, demonstration.problem, cpu_demo).is_valid
    assert not check_format(demonstration.response, demonstration.problem, RewardConfig()).is_valid


def test_an_unknown_closing_tactic_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="norm_num"):
        demonstrations_for(nat_sum_problems([(2, 3)]), closing_tactics=("linarith",))
