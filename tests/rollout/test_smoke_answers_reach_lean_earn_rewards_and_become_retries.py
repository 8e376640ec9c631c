"""A cpu-smoke run exercises the paths behind the format check: Lean's verdicts, rewards, retries.

Its model (trainer/sft/smoke_model.py) knows answers to the smoke promptset by heart, after a short SFT;
before it, every smoke answer failed the format check and nothing reached Lean. Real runs: the
trainer's own command with the preset's sizes, synchronous (η = 0) and asynchronous (η = 1), the
SFT'd model from its cache (built here on first use), the stand-in Lean server on a loopback port,
the smoke promptset. Everything below is counted from the runs' events. (How long each took is the
benchmark's business: benchmarks/asynchronous_smoke.py.)
"""

from __future__ import annotations

import pytest

from tests.asynchronous.cpu_smoke_cli import run_cpu_smoke
from trainer.sft.smoke_model import smoke_model_folder

pytestmark = pytest.mark.timeout(900)

STEPS = 6


@pytest.fixture(scope="module")
def smoke_runs(tmp_path_factory) -> dict[int, list[dict]]:
    from trainer.verification.standin_server import StandinServerThread

    folder = tmp_path_factory.mktemp("smoke-runs")
    runs = {}
    with StandinServerThread() as server:
        for eta in (0, 1):
            runs[eta] = run_cpu_smoke(folder / f"eta{eta}", server.url, f"schedule.total_steps={STEPS}",
                                      f"rollout.max_staleness={eta}", run_id=f"smoke-{eta}").events
    return runs


def answers(events, turn=None):
    return [event["payload"] for event in events
            if event["type"] == "rollout_finished" and not event["payload"]["is_evaluation"]
            and turn in (None, event["payload"]["turn"])]


@pytest.mark.parametrize("eta", [0, 1])
def test_the_run_starts_from_the_cached_smoke_model(smoke_runs, eta):
    started = next(event for event in smoke_runs[eta] if event["type"] == "run_started")
    assert started["payload"]["config"]["model"]["source"] == "tiny_smoke"
    assert started["payload"]["config"]["model"]["init_checkpoint"] == str(smoke_model_folder())


@pytest.mark.parametrize("eta", [0, 1])
def test_most_answers_pass_the_format_check_and_are_sent_to_lean(smoke_runs, eta):
    every = answers(smoke_runs[eta])
    sent_to_lean = [answer for answer in every if answer["verdict"] is not None]
    assert all(answer["format_error"] is None for answer in sent_to_lean)
    assert len(sent_to_lean) > 0.75 * len(every), [answer["format_error"] for answer in every]
    assert all(answer["is_standin_verdict"] for answer in sent_to_lean)


@pytest.mark.parametrize("eta", [0, 1])
def test_some_answers_earn_one_and_some_lean_rejects(smoke_runs, eta):
    verdicts = [answer["verdict"] for answer in answers(smoke_runs[eta], "first")]
    assert verdicts.count("valid") >= 1 and verdicts.count("lean_error") >= 1, verdicts
    assert {answer["reward"] for answer in answers(smoke_runs[eta]) if answer["verdict"] == "valid"} == {1.0}


@pytest.mark.parametrize("eta", [0, 1])
def test_rejected_first_attempts_become_retries_that_are_sampled_and_checked(smoke_runs, eta):
    created = [event["payload"] for event in smoke_runs[eta] if event["type"] == "retry_created"]
    assert created, "no rejected first attempt became a retry"
    first_keys = {answer["rollout_key"]: answer for answer in answers(smoke_runs[eta], "first")}
    assert all(first_keys[retry["parent_rollout_key"]]["verdict"] == "lean_error" for retry in created)
    sampled = answers(smoke_runs[eta], "retry")
    assert sampled and {retry["parent_rollout_key"] for retry in sampled} <= {retry["parent_rollout_key"] for retry in created}
    assert any(retry["verdict"] is not None for retry in sampled)  # a retry's answer reaches Lean too


def test_both_loops_train_the_same_number_of_rollouts_within_their_staleness(smoke_runs):
    metrics = {eta: [event["payload"]["values"] for event in events if event["type"] == "metrics"]
               for eta, events in smoke_runs.items()}
    assert [len(metrics[0]), len(metrics[1])] == [STEPS, STEPS]
    assert sum(values["rollouts"] for values in metrics[0]) == sum(values["rollouts"] for values in metrics[1])
    assert {values["rollout/staleness_max"] for values in metrics[0]} == {0}
    assert {values["rollout/staleness_max"] for values in metrics[1]} <= {0, 1}
    assert sum(values["rollout/dropped_stale"] for values in metrics[1]) == 0


def test_on_another_promptset_its_answers_fail_the_statement_check(tmp_path):
    """It knows four problems, not the format in general: another statement gets one of theirs."""
    from trainer.config import RunConfig
    from trainer.learning.models import load_policy
    from trainer.recipe.format_reward import check_format
    from trainer.recipe.problems import Problem
    from trainer.recipe.prompts import first_attempt_messages, render_prompt
    from trainer.sft.smoke_model import with_smoke_model

    config = with_smoke_model(RunConfig.from_preset("cpu-smoke"))
    model, tokenizer = load_policy(config.model)
    problem = Problem(problem_id="other", formal_statement="theorem other : (5 : ℕ) + 5 = 10 := by", name="other")
    prompt = tokenizer(render_prompt(tokenizer, first_attempt_messages(problem)), return_tensors="pt",
                       add_special_tokens=False)
    output = model.generate(**prompt, do_sample=False, max_new_tokens=config.rollout.max_response_tokens)
    answer = tokenizer.decode(output[0, prompt["input_ids"].shape[1]:], skip_special_tokens=True)
    check = check_format(answer, problem, config.reward)
    assert not check.is_valid and "smoke_" in answer, answer
