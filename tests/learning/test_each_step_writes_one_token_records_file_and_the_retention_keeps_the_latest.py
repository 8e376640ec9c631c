"""A run writes one token-records file a step beside its artifacts, a row for each rollout its learner scored,
and ``schedule.keep_token_records`` keeps only the latest steps' files (None keeps them all)."""

from __future__ import annotations

import copy

import pytest

from tests.asynchronous.synchronous_loop import PROBLEMS, synchronous_config
from tests.learning.conftest import FirstTokenRewardScorer
from trainer.observability import token_records


def run_three_steps(tokenizer, output, keep):
    from trainer.learning.models import tiny_random_policy
    from trainer.loop.driver import RunStatus, TrainingRun
    from trainer.observability.events import EventPublisher, EventType, ListSink

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    config = synchronous_config(schedule={"keep_token_records": keep})
    status = TrainingRun(config, PROBLEMS, output, EventPublisher("records", sink),
                         scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model, tokenizer=tokenizer).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return sink.of_type(EventType.ROLLOUT_FINISHED)


def test_every_step_has_a_file_with_a_row_for_each_of_its_rollouts(smollm2_tokenizer_once, tmp_path):
    rollouts = run_three_steps(smollm2_tokenizer_once, tmp_path, None)
    assert [(step, attempt) for step, attempt, _ in token_records.recorded_steps(tmp_path)] == [(1, 1), (2, 1), (3, 1)]
    for step in (1, 2, 3):
        finished = {e.payload["rollout_key"]: e.payload for e in rollouts if e.payload["step"] == step}
        summary = token_records.read_step_summary(tmp_path, step, 1)
        assert set(summary) == {key for key, payload in finished.items() if payload["num_tokens"]}
        for key in summary:
            record = token_records.read_rollout(tmp_path, step, 1, key)
            assert len(record["learner_logprob"]) == finished[key]["num_tokens"] == len(record["token_texts"])
            assert "".join(record["token_texts"]) == finished[key]["response"]


def test_keep_token_records_keeps_only_the_latest_steps_files(smollm2_tokenizer_once, tmp_path):
    run_three_steps(smollm2_tokenizer_once, tmp_path, 2)
    assert [step for step, _, _ in token_records.recorded_steps(tmp_path)] == [2, 3]
    assert not list((tmp_path / token_records.FOLDER).glob("*.partial"))


def test_keep_token_records_refuses_zero_saying_what_it_means():
    with pytest.raises(ValueError, match="keep_token_records"):
        synchronous_config(schedule={"keep_token_records": 0})
