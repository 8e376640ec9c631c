"""Issue 44, what must hold: a run with rollout.lean_tool_calls=2 whose answers write ``#eval`` (the issue's shell
command) in a tool block finishes; the Lean server's request log shows it never received the snippet; the refusal
is the answer's <lean_result>, stored with its call, and counted in the step's metrics (rollout/tool_calls_refused).

The answers come from an engine double that asks Lean through the run's real tool session, as the engines do
(trainer/rollout/lean_tool.py: wants_pause, pause, ready, finish): a tiny random model never writes a tool block.
Everything else is real: the driver, the snippet rules, the format check, the LeanVerifier, the stand-in Lean server
(trainer/verification/standin_server.py, a stand-in for kimina-lean-server) and its request log, the learner.
"""

from __future__ import annotations

import pytest

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink, RolloutFinished
from trainer.recipe.format_reward import TOOL_CALL_CLOSE
from trainer.recipe.problems import Problem
from trainer.rollout.base import Generation
from trainer.verification.standin_server import StandinServerThread

PROBLEMS = [
    Problem("add_small", "theorem add_small : (2 : ℕ) + 3 = 5 := by", name="add_small"),
    Problem("mul_small", "theorem mul_small : (6 : ℕ) * 7 = 42 := by", name="mul_small"),
]
SHELL = '#eval IO.Process.run {cmd := "sh", args := #["-c", "id > /tmp/pwned"]}'
STEPS = 2
PROMPTS_PER_STEP = 2


def answer_for(prompt: str, sample_index: int) -> str:
    """Sample 0 asks Lean to run a shell, sample 1 asks about its proof (a snippet within the rules), sample 2 asks
    nothing; each then writes the proof."""
    problem = next(p for p in PROBLEMS if p.formal_statement in prompt)
    proof = f"{problem.formal_statement}\n  norm_num"
    asking = [f"<lean>\n{SHELL}\n{TOOL_CALL_CLOSE}", f"<lean>\n{proof}\n{TOOL_CALL_CLOSE}", ""][sample_index]
    return f"<think>\n{asking}\nSo norm_num it is.\n</think>\nThe proof:\n```lean4\n{proof}\n```"


class ToolCallingEngine(CannedAnswersEngine):
    """The canned answers, paused at their </lean> and resumed with the tool's reply, as a real engine does."""

    def generate(self, prompts, sampling, progress=None, tools=None):
        if tools is None:
            yield from super().generate(prompts, sampling)
            return
        for prompt_index, prompt in enumerate(prompts):
            for sample_index in range(sampling.n):
                text = self.answer_for(self.tokenizer.decode(prompt), sample_index)
                asked, closes, rest = text.partition(TOOL_CALL_CLOSE)
                if closes:
                    asked_ids = self.tokenizer(asked + closes, add_special_tokens=False)["input_ids"]
                    assert tools.wants_pause(prompt_index, sample_index, asked_ids)
                    tools.pause(prompt_index, sample_index, prompt, asked_ids, [-0.5] * len(asked_ids),
                                f"p{prompt_index}-s{sample_index}")
                    [resumed] = tools.ready(block=True)
                    assert resumed.max_tokens > 0
                else:
                    rest = text
                rest_ids = self.tokenizer(rest, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
                yield tools.finish(Generation(prompt_index, sample_index, rest, rest_ids, len(rest_ids), False, 0.0,
                                              [-0.5] * len(rest_ids)))


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, smollm2_tokenizer_once):
    import copy

    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    with StandinServerThread() as server:
        config = tiny_run_config(
            rollout={"prompts_per_step": PROMPTS_PER_STEP, "samples_per_prompt": 3, "max_response_tokens": 256,
                     "lean_tool_calls": 2},
            optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
            schedule={"total_steps": STEPS, "eval_every": STEPS, "checkpoint_every": STEPS, "eval_samples": 3},
            verifier={"url": server.url},
        )
        status = TrainingRun(config, PROBLEMS, tmp_path_factory.mktemp("run"), EventPublisher("tools", sink),
                             model=model, tokenizer=tokenizer, engine=ToolCallingEngine(tokenizer, answer_for)).run()
        received = list(server.app.codes_received)
    return status, sink, received


def training_rollouts(sink) -> list[RolloutFinished]:
    rollouts = [RolloutFinished.model_validate(e.payload) for e in sink.of_type(EventType.ROLLOUT_FINISHED)]
    return [r for r in rollouts if not r.is_evaluation]


def test_the_run_finishes(finished_run):
    status, sink, _ = finished_run
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)


def test_the_lean_server_never_received_the_eval_snippet_but_did_receive_the_allowed_one(finished_run):
    _, _, received = finished_run
    assert received, "the stand-in's request log is empty: nothing reached Lean"
    assert not any("#eval" in code or "IO.Process" in code for code in received)
    assert any(code.rstrip().endswith("theorem add_small : (2 : ℕ) + 3 = 5 := by\n  norm_num") and "#print axioms"
               not in code for code in received)  # sample 1's snippet: the tool path itself reaches Lean


def test_each_refused_call_is_answered_with_the_refusal_and_stored_as_refused(finished_run):
    _, sink, _ = finished_run
    refused = [(rollout, call) for rollout in training_rollouts(sink) for call in rollout.tool_calls
               if call.snippet == SHELL]
    assert refused and all(rollout.sample_index == 0 for rollout, _ in refused)
    for rollout, call in refused:
        assert call.is_refused and call.verdict == "rejected"
        assert call.reply.startswith("\n<lean_result>\nNot sent to Lean: this snippet ")
        assert call.reply in rollout.response
        # The refusal is the trainer's reply, so the format check lets the answer through to its proof's verdict.
        assert rollout.format_error is None and rollout.verdict == "valid" and rollout.reward == 1.0
    allowed = [call for rollout in training_rollouts(sink) for call in rollout.tool_calls if call.snippet != SHELL]
    assert allowed and not any(call.is_refused for call in allowed)


def test_the_refusals_are_counted_in_each_step_s_metrics(finished_run):
    _, sink, _ = finished_run
    metrics = sink.of_type(EventType.METRICS)
    assert [e.payload["step"] for e in metrics] == list(range(1, STEPS + 1))
    # Each prompt's sample 0 writes the shell command: one refusal a prompt.
    assert [e.payload["values"]["rollout/tool_calls_refused"] for e in metrics] == [PROMPTS_PER_STEP] * STEPS
