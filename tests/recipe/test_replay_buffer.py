"""The replay buffer of retry prompts: capacity, draws, slot choice and checkpoint state."""

from __future__ import annotations

import json
import random

import pytest

from trainer.config import RetryConfig
from trainer.recipe.prompts import first_attempt_messages
from trainer.recipe.retry import ReplayBuffer, RetryPrompt


def retry_for(problem, number: int) -> RetryPrompt:
    messages = first_attempt_messages(problem) + [
        {"role": "assistant", "content": f"answer {number}"},
        {"role": "user", "content": f"# Error 1:\nError message: \nproblem {number}\n"},
    ]
    return RetryPrompt(problem, messages, f"s{number}-p0-r0", messages[-1]["content"], created_step=number)


def filled(problem, count: int, **config) -> ReplayBuffer:
    buffer = ReplayBuffer(RetryConfig(**config))
    for number in range(count):
        buffer.add(retry_for(problem, number))
    return buffer


def parent_keys(buffer: ReplayBuffer) -> list[str]:
    return [entry["parent_rollout_key"] for entry in buffer.state_dict()["entries"]]


def test_it_keeps_only_the_latest_entries(problem):
    buffer = filled(problem, 5, buffer_size=3)
    assert len(buffer) == 3
    assert parent_keys(buffer) == ["s2-p0-r0", "s3-p0-r0", "s4-p0-r0"]


def test_a_drawn_retry_leaves_the_buffer_so_each_is_retried_once(problem):
    buffer = filled(problem, 4)
    rng = random.Random(7)
    drawn = [buffer.draw(rng).parent_rollout_key for _ in range(4)]
    assert sorted(drawn) == [f"s{n}-p0-r0" for n in range(4)]
    assert len(buffer) == 0
    with pytest.raises(IndexError, match="the replay buffer is empty"):
        buffer.draw(rng)


def test_draws_are_reproducible_with_the_same_seed(problem):
    first, second = filled(problem, 50), filled(problem, 50)
    assert [first.draw(random.Random(3)).created_step for _ in range(10)] == [second.draw(random.Random(3)).created_step for _ in range(10)]


def test_each_slot_takes_a_retry_with_the_configured_probability(problem):
    choices = filled(problem, 2000).choose_prompt_slots(1000, random.Random(0))
    assert 450 <= sum(choices) <= 550


def test_an_empty_buffer_gives_no_retry_slots(problem):
    assert filled(problem, 0).choose_prompt_slots(8, random.Random(0)) == [False] * 8


def test_slots_never_ask_for_more_retries_than_the_buffer_holds(problem):
    buffer = filled(problem, 3, replay_probability=1.0)
    assert buffer.choose_prompt_slots(6, random.Random(0)) == [True, True, True, False, False, False]


@pytest.mark.parametrize("config", [{"replay_probability": 0.0}, {"enabled": False}])
def test_no_slot_draws_when_replay_is_off(problem, config):
    assert not any(filled(problem, 10, **config).choose_prompt_slots(50, random.Random(0)))


def test_the_state_round_trips_through_json(problem):
    buffer = filled(problem, 6, buffer_size=10)
    state = json.loads(json.dumps(buffer.state_dict()))
    restored = ReplayBuffer(RetryConfig(buffer_size=10))
    restored.load_state_dict(state)
    assert restored.state_dict() == buffer.state_dict()
    assert restored.draw(random.Random(1)).messages == buffer.draw(random.Random(1)).messages


def test_restoring_into_a_smaller_buffer_keeps_the_latest_entries(problem):
    state = filled(problem, 6, buffer_size=10).state_dict()
    smaller = ReplayBuffer(RetryConfig(buffer_size=2))
    smaller.load_state_dict(state)
    assert parent_keys(smaller) == ["s4-p0-r0", "s5-p0-r0"]


def test_a_state_of_another_version_is_refused(problem):
    with pytest.raises(ValueError, match="replay buffer state has version 2, this trainer reads version 1"):
        ReplayBuffer(RetryConfig()).load_state_dict({"version": 2, "entries": []})
