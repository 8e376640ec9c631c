"""η = 0 (rollout.max_staleness, the default and the h100x8 preset's) is the release's synchronous loop exactly:
the same answers, rewards and trained sequences as recorded before asynchronous RL existed, and the same losses,
gradient norms and weight updates within float32's rounding, on any x86 CPU (Intel with AMX, AMD, AVX2 only).
tests/asynchronous/synchronous_loop.py says why the floats have tolerances and what sets them."""

from __future__ import annotations

import json

import pytest

from tests.asynchronous.synchronous_loop import (
    LOSS_ABSOLUTE_TOLERANCE,
    RECORD,
    float_differences,
    run_synchronous_loop,
    stable_part,
)

REWRITE = ("if that is meant, rewrite the record with `python -m tests.asynchronous.synchronous_loop` "
           "and say why in the commit")


@pytest.fixture(scope="module")
def three_steps(smollm2_tokenizer_once):
    return run_synchronous_loop(smollm2_tokenizer_once)


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


def test_three_synchronous_steps_sample_the_recorded_answers_rewards_and_trained_sequences(three_steps, record):
    assert stable_part(three_steps) == stable_part(record), f"the synchronous loop's answers changed; {REWRITE}"


def test_three_synchronous_steps_reproduce_the_recorded_losses_and_updates_within_float32_rounding(three_steps, record):
    assert float_differences(three_steps, record) == [], f"the synchronous loop's numbers changed; {REWRITE}"


def test_the_tolerances_see_a_change_of_the_loop(record):
    """A loss scaled by 1 % (a normalisation off by a token in a hundred) or a step's update lost is caught."""
    scaled = json.loads(json.dumps(record))
    scaled["steps"][0]["learner/loss"] *= 1.01
    assert abs(record["steps"][0]["learner/loss"]) * 0.01 > LOSS_ABSOLUTE_TOLERANCE
    assert float_differences(scaled, record)

    one_step_short = json.loads(json.dumps(record))
    one_step_short["weight_update_norms"] = {name: norm * 2 / 3 for name, norm in record["weight_update_norms"].items()}
    assert float_differences(one_step_short, record)
