"""Issue 44 (truth): a log-probability the engine did not measure (a Lean reply's tokens, never sampled, or tokens
the engine returned none for) stays not measured, NaN, through the tool session (trainer/rollout/lean_tool.py);
never 0.0, which reads as probability 1. Its consumers leave it out: the train–inference gap
(trainer/observability/gap.py) and the behaviour importance weight of an asynchronous run (trainer/learning/learner.py).
Real parts: SmolLM2's tokenizer and the tool session; the Lean answer is a finished Future (no Lean is asked here)."""

from __future__ import annotations

import concurrent.futures
import math

import pytest
import torch

from trainer.config import RunConfig
from trainer.learning.learner import behaviour_importance_weights
from trainer.observability.gap import train_inference_gap
from trainer.rollout.base import Generation
from trainer.rollout.lean_tool import LeanTool
from trainer.sft.smoke_model import SMOKE_HEADER
from trainer.verification.verdicts import Verdict, VerificationResult


@pytest.fixture(scope="module")
def tokenizer():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()


def lean_accepts(code, key) -> concurrent.futures.Future:
    answered: concurrent.futures.Future = concurrent.futures.Future()
    answered.set_result(VerificationResult(Verdict.VALID))
    return answered


def answer_with_one_call(tokenizer, before_logprobs, after_logprobs):
    """An answer that asks Lean once; the engine reports ``before_logprobs`` for the part up to </lean>, and
    ``after_logprobs`` for the rest (a list, possibly short, or None)."""
    session = LeanTool(2, lean_accepts, reward_config=RunConfig.from_preset("cpu-smoke").reward).session(
        [SMOKE_HEADER], tokenizer, 400, 1)
    before = tokenizer("<think>\n<lean>\ntheorem t : (2 : ℕ) + 2 = 4 := by\n  norm_num\n</lean>",
                       add_special_tokens=False)["input_ids"]
    after = tokenizer("\nGood.\n</think>", add_special_tokens=False)["input_ids"]
    assert session.wants_pause(0, 0, before)
    session.pause(0, 0, [1, 2, 3], before, before_logprobs(len(before)), "a1-s1-p0-r0")
    session.ready(block=True)
    generation = session.finish(Generation(0, 0, "", after, len(after), False, 0.0, after_logprobs(len(after))))
    return generation, len(before), len(after)


def test_a_lean_reply_s_tokens_are_not_measured_and_the_sampled_ones_keep_their_values(tokenizer):
    generation, before, after = answer_with_one_call(tokenizer, lambda n: [-0.5] * n, lambda n: [-0.25] * n)
    [call] = generation.tool_calls
    start, end = call.reply_tokens
    assert start == before and end > start and len(generation.logprobs) == len(generation.token_ids)
    assert all(math.isnan(value) for value in generation.logprobs[start:end])
    assert generation.logprobs[:start] == [-0.5] * before and generation.logprobs[end:] == [-0.25] * after


def test_tokens_the_engine_gave_no_log_probability_for_are_not_measured(tokenizer):
    generation, before, after = answer_with_one_call(tokenizer, lambda n: [-0.5] * (n - 2), lambda n: [-0.25] * (n - 1))
    [call] = generation.tool_calls
    start, end = call.reply_tokens
    assert generation.logprobs[: before - 2] == [-0.5] * (before - 2)
    assert all(math.isnan(value) for value in generation.logprobs[before - 2: end])
    assert generation.logprobs[end: end + after - 1] == [-0.25] * (after - 1) and math.isnan(generation.logprobs[-1])
    assert 0.0 not in generation.logprobs


def test_an_engine_that_reports_no_log_probabilities_leaves_the_whole_answer_not_measured(tokenizer):
    generation, _, _ = answer_with_one_call(tokenizer, lambda n: [], lambda n: None)
    assert generation.logprobs is None  # as an answer without a tool call from such an engine


def test_the_train_inference_gap_leaves_not_measured_tokens_out():
    learner = torch.tensor([-1.0, -2.0, -3.0, -0.5])  # (R,)
    engine = [-1.5, float("nan"), -3.0, float("nan")]
    gap = train_inference_gap([(learner, engine)])
    assert gap["logprob_diff_tokens"] == 2
    assert gap["logprob_abs_diff_mean"] == pytest.approx(0.25) and gap["logprob_abs_diff_max"] == pytest.approx(0.5)
    assert gap["ratio_outside_share"] == 0.0


def test_a_token_with_no_behaviour_log_probability_gets_importance_weight_zero_and_the_rest_their_ratio():
    proximal = torch.tensor([[-1.0, -1.0, -2.0]])  # (B, T)
    behaviour = torch.tensor([[-1.5, float("nan"), -1.0]])  # (B, T)
    weights = behaviour_importance_weights(proximal, behaviour, cap=2.0)
    assert torch.isfinite(weights).all()
    assert weights[0].tolist() == pytest.approx([math.exp(0.5), 0.0, math.exp(-1.0)])
