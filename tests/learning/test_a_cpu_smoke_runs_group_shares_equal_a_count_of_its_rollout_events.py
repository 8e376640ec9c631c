"""A three-step CPU run says, in each step's metrics, where its rollouts went (issue 47), and what it says equals a
count made from the run's own rollout events: each group (a prompt slot's answers, error-correction prompts
included) sorted by its answers' rewards, censored answers left out, and the tokens of the groups without signal
added up.

Answers come from a canned-answers engine (a tiny random model never writes the recipe's shape, so Lean would
never be reached); the format check, the Lean client, the stand-in server, rewards, advantages, learner and
retries are real. One problem is proved by some answers, one by none (its retries fix it), and one is outside
what the stand-in decides, so every verdict on it is censored."""

from __future__ import annotations

import copy
from collections import defaultdict

import pytest

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import group_key

SHARES = ("batch/groups_with_signal", "batch/groups_all_fail", "batch/groups_all_pass", "batch/groups_unscored")
MIXED = Problem("add_small", "theorem add_small : (2 : ℕ) + 3 = 5 := by", name="add_small")
ALL_WRONG = Problem("mul_small", "theorem mul_small : (6 : ℕ) * 7 = 42 := by", name="mul_small")
UNDECIDED = Problem("add_zero", "theorem add_zero (n : ℕ) : n + 0 = n := by", name="add_zero")


def answer(statement: str, tactic: str) -> str:
    return f"<think>\nCompute both sides.\n</think>\nSo:\n```lean4\n{statement}\n  {tactic}\n```"


def answer_for(prompt: str, sample_index: int) -> str:
    problem = next(p for p in (MIXED, ALL_WRONG, UNDECIDED) if p.formal_statement in prompt)
    if "Error" in prompt:  # an error-correction turn: fix it
        return answer(problem.formal_statement, "norm_num")
    if problem is MIXED:  # one proves it, one Lean rejects, one rambles
        return [answer(problem.formal_statement, "norm_num"), answer(problem.formal_statement, "rfl\n  norm_num"),
                "I am not sure how to do this."][sample_index]
    if problem is ALL_WRONG:
        return answer(problem.formal_statement, "rfl\n  norm_num")
    return answer(problem.formal_statement, "simp")


@pytest.fixture(scope="module")
def three_steps(tmp_path_factory, smollm2_tokenizer_once):
    from trainer.learning.models import tiny_random_policy
    from trainer.loop.driver import RunStatus, TrainingRun
    from trainer.observability.events import EventPublisher, EventType, ListSink
    from trainer.verification.standin_server import StandinServerThread

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    with StandinServerThread() as server:
        config = tiny_run_config(
            rollout={"prompts_per_step": 3, "samples_per_prompt": 3, "max_response_tokens": 64},
            optimizer={"mini_batch_prompts": 3, "micro_batch_sequences": 3},
            schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 0},
            verifier={"url": server.url},
        )
        status = TrainingRun(config, [MIXED, ALL_WRONG, UNDECIDED], tmp_path_factory.mktemp("run"),
                             EventPublisher("signal", sink), model=model, tokenizer=tokenizer,
                             engine=CannedAnswersEngine(tokenizer, answer_for)).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    metrics = {event.payload["step"]: event.payload["values"] for event in sink.of_type(EventType.METRICS)}
    rollouts = [event.payload for event in sink.of_type(EventType.ROLLOUT_FINISHED) if not event.payload["is_evaluation"]]
    return metrics, rollouts


def counted_from_events(rollouts: list[dict], step: int) -> tuple[dict, int]:
    """The step's groups sorted by their answers' rewards (censored answers are no evidence), and the tokens
    generated in groups where every scored answer earned the same (no signal under Dr.GRPO)."""
    groups = defaultdict(list)
    for rollout in rollouts:
        if rollout["step"] == step:
            groups[group_key(rollout["rollout_key"])].append(rollout)
    counts = dict.fromkeys(SHARES, 0)
    tokens_without_signal = 0
    for answers in groups.values():
        rewards = [answer["reward"] for answer in answers if not answer["is_censored"]]
        assert len(rewards) != 1, "a lone scored answer (verl's group of one) is the unit test's; this count omits it"
        if not rewards:
            share = "batch/groups_unscored"
        elif all(reward > 0 for reward in rewards):
            share = "batch/groups_all_pass"
        elif all(reward == 0 for reward in rewards):
            share = "batch/groups_all_fail"
        else:
            share = "batch/groups_with_signal"
        counts[share] += 1
        if share != "batch/groups_with_signal":
            tokens_without_signal += sum(answer["num_tokens"] for answer in answers)
    return {name: count / len(groups) for name, count in counts.items()}, tokens_without_signal


def test_each_steps_shares_and_tokens_without_signal_equal_a_count_of_its_rollout_events(three_steps):
    metrics, rollouts = three_steps
    assert sorted(metrics) == [1, 2, 3]
    for step, values in metrics.items():
        shares, tokens_without_signal = counted_from_events(rollouts, step)
        assert {name: values[name] for name in SHARES} == pytest.approx(shares), f"step {step}"
        assert values["batch/tokens_without_signal"] == tokens_without_signal, f"step {step}"
        assert sum(values[name] for name in SHARES) == pytest.approx(1.0)


def test_the_counted_groups_include_error_correction_prompts_and_every_kind_of_group(three_steps):
    """What makes the count above mean something: retry groups were among those counted (a step that left them out
    would divide by fewer groups), and each of the four kinds of group occurred."""
    metrics, rollouts = three_steps
    assert any(rollout["turn"] == "retry" for rollout in rollouts), "the run sampled no error-correction prompt"
    assert any(rollout["is_censored"] for rollout in rollouts), "the stand-in censored nothing"
    for name in SHARES:
        assert any(values[name] > 0 for values in metrics.values()), f"no step had a group of {name}"
