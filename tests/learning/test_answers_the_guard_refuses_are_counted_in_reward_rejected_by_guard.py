"""Answers the guard refuses (the integrity rules before Lean, the statement and axioms check after it) earn 0, are
counted per step in ``reward/rejected_by_guard``, and carry their reason to the rollout page.

The driver end to end with the real scorer and the stand-in Lean server; answers come from a canned-answers engine
(a test double: a tiny random model never writes the recipe's shape): sample 0 proves the statement, sample 1
closes it with ``sorryAx``, sample 2 with Lean's rejected ``rfl`` after ``norm_num``. Only sample 1 is the guard's.
"""

from __future__ import annotations

import pytest

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.verification.standin_server import StandinServerThread


def answer_for(prompt: str, sample_index: int) -> str:
    problem = next(p for p in PROBLEMS if p.formal_statement in prompt)
    return answer(problem.formal_statement, ["norm_num", "exact sorryAx _ false", "rfl\n  norm_num"][sample_index])


@pytest.fixture(scope="module")
def run_events(tmp_path_factory, smollm2_tokenizer_once):
    import copy

    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    with StandinServerThread() as server:
        config = tiny_run_config(
            rollout={"prompts_per_step": 2, "samples_per_prompt": 3, "max_response_tokens": 64},
            optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
            retry={"enabled": False},
            schedule={"total_steps": 2, "eval_every": 0, "checkpoint_every": 0},
            verifier={"url": server.url},
        )
        status = TrainingRun(config, PROBLEMS, tmp_path_factory.mktemp("run"), EventPublisher("guard", sink),
                             model=model, tokenizer=tokenizer, engine=CannedAnswersEngine(tokenizer, answer_for)).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return sink


def test_each_steps_metric_counts_the_answers_the_guard_refused(run_events):
    rollouts = [event.payload for event in run_events.of_type(EventType.ROLLOUT_FINISHED)]
    for event in run_events.of_type(EventType.METRICS):
        step = event.payload["step"]
        refused = [r for r in rollouts if r["step"] == step and r["verdict"] == "rejected"]
        assert event.payload["values"]["reward/rejected_by_guard"] == len(refused) == 2  # one per prompt slot


def test_a_refused_answer_earns_0_and_its_event_says_why(run_events):
    rollouts = [event.payload for event in run_events.of_type(EventType.ROLLOUT_FINISHED)]
    refused = [r for r in rollouts if r["verdict"] == "rejected"]
    assert refused and all(r["reward"] == 0.0 and not r["is_censored"] for r in refused)
    assert all(r["reasons"] == ["uses sorryAx: an unproved goal"] for r in refused)
    assert all("sorryAx" in r["response"] for r in refused)
    lean_rejected = [r for r in rollouts if r["verdict"] == "lean_error"]
    assert lean_rejected  # Lean's own rejections are not the guard's
