"""``rounds/first_solved_share`` counts, per round of correction r, the share of round r's groups (each the
answers to one rejected chain's next prompt) that some answer solved. Every rejected answer is retried,
even when a sibling answer solved its problem, so a round-r group is not "a problem first solved in round r"
(issue 44, "Truth"): the share is of rejected chains corrected, not of problems."""

from types import SimpleNamespace

from trainer.loop.driver import round_metrics
from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import PromptSlot, Rollout

PROBLEM = Problem("p-1", "theorem t : (1 : ℕ) = 1 := by")


def answer(slot_index: int, slot: PromptSlot, sample: int, reward: float | None) -> Rollout:
    scored = SimpleNamespace(is_censored=reward is None, reward=reward)  # only what round_metrics reads
    return Rollout(f"s{slot_index}-r{sample}", slot_index, slot, None, scored, 0.0)


def test_a_corrected_chain_counts_even_when_a_first_attempt_of_its_problem_was_accepted():
    first = PromptSlot(PROBLEM, [], "", [], round=0)
    retry = PromptSlot(PROBLEM, [], "", [], turn="retry", parent_rollout_key="s0-r1", round=1)
    rollouts = [answer(0, first, 0, 1.0), answer(0, first, 1, 0.0),  # a sibling solved the problem in round 0...
                answer(1, retry, 0, 1.0), answer(1, retry, 1, 0.0)]  # ...and the rejected one's retry is corrected
    metrics = round_metrics(rollouts, max_rounds=2)
    assert metrics["rounds/first_solved_share"] == {"0": 1.0, "1": 1.0}  # the problem, counted in both rounds


def test_a_round_whose_answers_were_all_censored_is_not_measured_never_zero():
    retry = PromptSlot(PROBLEM, [], "", [], turn="retry", round=1)
    metrics = round_metrics([answer(0, retry, 0, None)], max_rounds=2)
    assert metrics["rounds/first_solved_share"] == {} and metrics["rounds/rollouts"] == {"1": 1}
