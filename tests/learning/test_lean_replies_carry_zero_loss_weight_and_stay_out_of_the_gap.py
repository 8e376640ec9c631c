"""Lean's replies inside an answer (rollout.lean_tool_calls) are context, not policy: the model reads them, the
engine never sampled them. The learner's mask gives their tokens zero loss weight, and the train–inference gap
leaves them out (trainer/learning/batching.py ``TokenBatch.loss_mask``, trainer/learning/learner.py ``sampled_only``)."""

from __future__ import annotations

import math

import pytest

from tests.learning.conftest import tiny_run_config
from trainer.learning.batching import TrainingSequence, token_batch
from trainer.learning.learner import Learner
from trainer.recipe.rollouts import PromptSlot, Rollout
from trainer.rollout.base import Generation
from trainer.rollout.lean_tool import ToolCall

# Response tokens 2..4 are Lean's reply to the call that ended at token 1.
CONTEXT = [False, False, True, True, True, False]


def with_a_reply(advantage: float = 0.5, **fields) -> TrainingSequence:
    return TrainingSequence(prompt_ids=[11, 12, 13], response_ids=[21, 22, 31, 32, 33, 23], advantage=advantage,
                            group_key="p0", context_mask=CONTEXT, **fields)


@pytest.mark.parametrize("packed", [True, False])
def test_the_learner_s_mask_weighs_lean_s_reply_zero_in_both_layouts(tiny_policy, packed):
    model, tokenizer = tiny_policy()
    learner = Learner(tiny_run_config(), model, tokenizer)
    batch = token_batch([with_a_reply(), TrainingSequence([11], [41, 42], 0.5, "p0")], 0, learner.device, packed=packed)
    weights = batch.per_sequence(batch.loss_mask)
    assert weights[0].tolist() == [0.0 if flag else 1.0 for flag in CONTEXT]
    assert weights[1].tolist() == [1.0, 1.0]
    assert batch.per_sequence(batch.response_mask)[0].tolist() == [1.0] * 6  # still scored: the model reads them


def test_the_loss_and_the_token_count_leave_the_reply_out(tiny_policy):
    config = tiny_run_config(rollout={"prompts_per_step": 1}, optimizer={"mini_batch_prompts": 1, "micro_batch_sequences": 4})
    model, tokenizer = tiny_policy()
    metrics = Learner(config, model, tokenizer).step([with_a_reply()])
    # π_old is the current policy, so each sampled token's loss is -A; the release's scale at one sequence is 2 / 1.
    assert math.isclose(metrics["loss"], -(0.5 * 3) / 192 * 2, rel_tol=1e-5)
    assert metrics["tokens"] == 3


def test_the_train_inference_gap_compares_only_the_sampled_tokens(tiny_policy):
    model, tokenizer = tiny_policy()
    learner = Learner(tiny_run_config(), model, tokenizer)
    sequence = with_a_reply(advantage=0.0)
    learner_logprobs = learner.old_logprobs([[sequence]])[id(sequence)]
    # The engine's own numbers at the sampled tokens, placeholders (0.0) at the reply it never sampled.
    engine = [value if not flag else 0.0 for value, flag in zip(learner_logprobs.tolist(), CONTEXT)]
    metrics = learner.step([with_a_reply(advantage=0.0, sampled_logprobs=engine)])
    assert metrics["logprob_diff_tokens"] == 3
    assert metrics["logprob_abs_diff_max"] < 1e-4


def test_the_driver_hands_the_learner_each_reply_s_tokens_as_context(tiny_policy):
    from trainer.loop.driver import TrainingRun
    from trainer.observability.events import EventPublisher, ListSink
    from trainer.recipe.problems import Problem

    model, tokenizer = tiny_policy()
    call = ToolCall(snippet="theorem t : 1 = 1 := by rfl", reply="\n<lean_result>\nLean accepts this snippet: no errors."
                    "\n</lean_result>\n", verdict="valid", is_decided=True, is_standin_verdict=True, asked_at=1.0,
                    answered_at=2.0, reply_tokens=(2, 5))
    generation = Generation(0, 0, "…", [21, 22, 31, 32, 33, 23], 6, False, 0.1, [-1.0] * 6, tool_calls=(call,))
    slot = PromptSlot(Problem("p", "theorem t : 1 = 1 := by"), [], "", [11, 12, 13])
    scored = type("Scored", (), {"reward": 1.0, "is_censored": False})()
    run = TrainingRun(tiny_run_config(), [slot.problem], "/tmp", EventPublisher("t", ListSink()), model=model, tokenizer=tokenizer)
    import torch

    [sequence] = run.training_sequences([slot], [Rollout("k", 0, slot, generation, scored, 0.0)], torch.tensor([[0.5]]))
    assert list(sequence.context_mask) == CONTEXT
    learner = Learner(tiny_run_config(), model, tokenizer)
    batch = learner._batch([sequence])
    assert batch.per_sequence(batch.loss_mask)[0].tolist() == [1.0, 1.0, 0.0, 0.0, 0.0, 1.0]
