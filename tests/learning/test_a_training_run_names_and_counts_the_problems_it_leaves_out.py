"""A training run leaves out a problem whose prompt is over ``rollout.max_prompt_tokens`` (the one budget rule,
trainer/recipe/prompt_budget.py), and never silently (issue 45): its log names the problem with the reason once, when
first met, and every step's metrics count the problems left out so far (``problems_not_attempted``).

Answers come from a canned-answers engine (a test double: a tiny random model never writes the recipe's shape);
the driver, the scorer, the Lean client and the stand-in Lean server (a stand-in, not Lean) are real."""

from __future__ import annotations

import copy

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.problems import Problem
from trainer.verification.standin_server import StandinServerThread

LONG = Problem("long_sum", "theorem long_sum : (0 : ℕ)" + " + 1" * 800 + " = 800 := by", name="long_sum")
STEPS = 2


def test_a_problem_over_the_prompt_budget_is_named_once_and_counted_every_step(smollm2_tokenizer_once, tmp_path):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    with StandinServerThread() as server:
        # Three problems, two a step: the first pass over them (within two steps) meets the long one.
        config = tiny_run_config(rollout={"prompts_per_step": 2, "samples_per_prompt": 2, "max_response_tokens": 64},
                                 optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 2},
                                 schedule={"total_steps": STEPS, "eval_every": 0, "checkpoint_every": 0},
                                 verifier={"url": server.url})
        status = TrainingRun(config, [*PROBLEMS, LONG], tmp_path, EventPublisher("long", sink), model=model,
                             tokenizer=tokenizer, engine=CannedAnswersEngine(tokenizer, answer_for),
                             install_signal_handlers=False).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    named = [event.payload["message"] for event in sink.of_type(EventType.LOG) if "not attempted" in event.payload["message"]]
    assert len(named) == 1, named
    assert "1 problem(s) not attempted: long_sum: its prompt is " in named[0]
    assert "tokens, over rollout.max_prompt_tokens (1,024)" in named[0]
    counts = [event.payload["values"]["problems_not_attempted"] for event in sink.of_type(EventType.METRICS)]
    assert counts[-1] == 1 and len(counts) == STEPS
    trained = {event.payload["problem_id"] for event in sink.of_type(EventType.ROLLOUT_FINISHED)}
    assert "long_sum" not in trained and trained == {problem.problem_id for problem in PROBLEMS}
