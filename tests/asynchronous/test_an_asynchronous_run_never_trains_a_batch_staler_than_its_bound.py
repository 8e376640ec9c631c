"""rollout.max_staleness = η ≥ 1: the next batches are generated while the learner updates, every rollout records
the policy version that wrote it, and none is trained more than η updates after it."""

from __future__ import annotations

import copy

import pytest

from tests.asynchronous.synchronous_loop import PROBLEMS, synchronous_config
from tests.learning.conftest import FirstTokenRewardScorer
from trainer.asynchronous.pipeline import split_by_staleness
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.rollouts import Rollout


def run(tokenizer, tmp_path, **rollout):
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    sink = ListSink()
    status = TrainingRun(synchronous_config(**rollout), PROBLEMS, tmp_path, EventPublisher("async", sink),
                         scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model, tokenizer=tokenizer).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return sink


@pytest.fixture(scope="module")
def one_step_off(smollm2_tokenizer_once, tmp_path_factory):
    return run(smollm2_tokenizer_once, tmp_path_factory.mktemp("eta1"), max_staleness=1)


def metrics(sink):
    return {event.payload["step"]: event.payload["values"] for event in sink.of_type(EventType.METRICS)}


def test_every_rollout_records_the_policy_version_that_wrote_it(one_step_off):
    versions = {(e.payload["step"], e.payload["policy_version"]) for e in one_step_off.of_type(EventType.ROLLOUT_FINISHED)}
    # Steps 1 and 2 were handed over before any update (version 0); step 3 once version 1 was pushed.
    assert versions == {(1, 0), (2, 0), (3, 1)}


def test_every_step_reports_its_staleness_at_most_eta_and_none_dropped(one_step_off):
    by_step = metrics(one_step_off)
    assert [by_step[step]["rollout/staleness_max"] for step in (1, 2, 3)] == [0, 1, 1]
    assert [by_step[step]["rollout/staleness_mean"] for step in (1, 2, 3)] == [0.0, 1.0, 1.0]
    assert all(values["rollout/dropped_stale"] == 0 for values in by_step.values())
    assert [by_step[step]["rollout/policy_version"] for step in (1, 2, 3)] == [0, 1, 2]


def test_the_next_batch_is_generated_while_the_learner_updates(one_step_off):
    by_step = metrics(one_step_off)
    learning_1 = by_step[1]["time/phases"]["learning"]
    generation_2 = by_step[2]["time/phases"]["generation"]
    assert generation_2[0] < learning_1[1], (generation_2, learning_1)
    for values in by_step.values():
        # The first-token scorer is a test double that sends nothing to Lean, so no step has a "lean" phase
        # (test_the_lean_phase_runs_from_the_first_proof_sent_to_lean_to_its_last_verdict.py has one that does).
        assert set(values["time/phases"]) == {"generation", "learning", "sync"}
        assert values["time/learner_idle_s"] >= 0 and values["time/generation_idle_s"] >= 0


def test_it_trains_as_many_rollouts_as_the_synchronous_run(one_step_off, smollm2_tokenizer_once, tmp_path):
    synchronous = metrics(run(smollm2_tokenizer_once, tmp_path))
    asynchronous = metrics(one_step_off)
    assert [v["rollouts"] for v in asynchronous.values()] == [v["rollouts"] for v in synchronous.values()] == [8, 8, 8]
    assert all(values["rollout/staleness_max"] == 0 for values in synchronous.values())
    assert all("time/phases" in values for values in synchronous.values())


def _rollout(version: int) -> Rollout:
    return Rollout(f"r{version}", 0, None, None, None, 0.0, policy_version=version)


def test_a_rollout_more_than_eta_updates_old_is_dropped_not_trained():
    rollouts = [_rollout(version) for version in (7, 6, 5, 4)]
    trained, dropped = split_by_staleness(rollouts, learner_version=7, max_staleness=2)
    assert [r.policy_version for r in trained] == [7, 6, 5]
    assert [r.policy_version for r in dropped] == [4]
    trained, dropped = split_by_staleness(rollouts, learner_version=7, max_staleness=0)
    assert [r.policy_version for r in trained] == [7] and len(dropped) == 3
