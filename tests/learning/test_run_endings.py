"""How a run ends: SIGTERM (Ray's stop_job) cancels it cleanly, an exception fails it with the reason."""

from __future__ import annotations

import os
import signal

from tests.learning.conftest import CannedAnswersEngine, FirstTokenRewardScorer, tiny_run_config
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.problems import Problem

PROBLEMS = [Problem("p0", "theorem t0 : (0 : ℕ) + 1 = 1 := by")]


def config():
    return tiny_run_config(
        rollout={"prompts_per_step": 1, "samples_per_prompt": 2, "max_response_tokens": 4},
        optimizer={"mini_batch_prompts": 1, "micro_batch_sequences": 2},
        schedule={"total_steps": 3, "eval_every": 0, "checkpoint_every": 1},
    )


def test_sigterm_during_a_step_ends_the_run_cancelled_keeping_only_complete_checkpoints(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy()
    calls = {"generate": 0}

    def answer_for(prompt, sample_index):
        if sample_index == 0:
            calls["generate"] += 1
            if calls["generate"] == 2:  # in step 2's generation, as Ray's stop_job would
                os.kill(os.getpid(), signal.SIGTERM)
        return ["ab", "cd"][sample_index]

    sink = ListSink()
    handler_before = signal.getsignal(signal.SIGTERM)
    status = TrainingRun(config(), PROBLEMS, tmp_path, EventPublisher("cancel", sink),
                         scorer=FirstTokenRewardScorer("a"), model=model, tokenizer=tokenizer,
                         engine=CannedAnswersEngine(tokenizer, answer_for)).run()

    assert status is RunStatus.CANCELLED
    finished = sink.events[-1]
    assert finished.type == EventType.RUN_FINISHED
    assert finished.payload["status"] == "cancelled" and "SIGTERM" in finished.payload["reason"]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step_000001"]
    assert signal.getsignal(signal.SIGTERM) == handler_before


def test_an_exception_ends_the_run_failed_with_the_reason_and_an_error_event(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy()

    class BrokenScorer:
        async def score(self, problem, response, num_tokens=None, max_tokens=None, *, key=None):
            raise RuntimeError("scorer exploded")

    sink = ListSink()
    status = TrainingRun(config(), PROBLEMS, tmp_path, EventPublisher("fail", sink),
                         scorer=BrokenScorer(), model=model, tokenizer=tokenizer,
                         engine=CannedAnswersEngine(tokenizer, lambda prompt, index: "x")).run()

    assert status is RunStatus.FAILED
    assert sink.events[-1].payload == {"status": "failed", "reason": "RuntimeError: scorer exploded", "step": 1}
    error = sink.of_type(EventType.ERROR)[0].payload
    assert "scorer exploded" in error["traceback"]
