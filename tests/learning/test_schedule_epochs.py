"""The schedule in epochs, as the release runs it (total_epochs=15), or in steps, or both (whichever ends first).

verl's trainer, which the release runs, counts an epoch as the dataloader's length with
``drop_last=True`` (len(dataset) // batch size full batches) and stops at
``total_training_steps`` when that is set: ``verl_steps`` below is that loop, written out.
"""

from __future__ import annotations

import pytest

from tests.learning.conftest import CannedAnswersEngine, FirstTokenRewardScorer, tiny_run_config
from trainer.config import RunConfig
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.problems import Problem


def verl_steps(dataset_size: int, batch_size: int, total_epochs: int, total_training_steps: int | None) -> int:
    """How many steps verl's RayPPOTrainer.fit() runs: epochs of full batches, cut at total_training_steps."""
    steps = 0
    for _ in range(total_epochs):
        for _ in range(dataset_size // batch_size):  # StatefulDataLoader(drop_last=True)
            steps += 1
            if total_training_steps is not None and steps >= total_training_steps:
                return steps
    return steps


@pytest.mark.parametrize(("problems", "per_step", "epochs", "steps"), [
    (10_000, 256, 15, None),  # the release: 39 full batches an epoch, 16 problems left over each time
    (512, 256, 15, None),
    (300, 256, 15, 7),
    (300, 256, 2, 100),
    (7, 2, 3, None),
])
def test_epochs_end_where_the_releases_would(problems, per_step, epochs, steps):
    config = RunConfig.from_preset("h100x8", {"schedule": {"total_epochs": epochs, "total_steps": steps},
                                              "rollout": {"prompts_per_step": per_step},
                                              "optimizer": {"mini_batch_prompts": 1}})
    assert config.planned_steps(problems) == verl_steps(problems, per_step, epochs, steps)


def test_the_release_default_is_fifteen_epochs_and_the_cpu_presets_keep_their_steps():
    assert RunConfig.from_preset("h100x8").schedule.total_epochs == 15
    assert RunConfig.from_preset("h100x8").schedule.total_steps is None
    assert RunConfig.from_preset("cpu-demo").planned_steps(24) == 20
    assert RunConfig.from_preset("cpu-smoke").planned_steps(24) == 2


def test_a_schedule_without_an_end_is_refused():
    with pytest.raises(ValueError, match="total_epochs and schedule.total_steps are both unset"):
        RunConfig.from_preset("cpu-demo", {"schedule": {"total_steps": None}})


PROBLEMS = [Problem(f"p{i}", f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by") for i in range(5)]


def run_in_epochs(tiny_policy, tmp_path, problems, epochs=2):
    model, tokenizer = tiny_policy()
    config = tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 2, "max_response_tokens": 4},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 2},
        retry={"enabled": False},
        schedule={"total_epochs": epochs, "total_steps": None, "eval_every": 0, "checkpoint_every": 0},
    )
    sink = ListSink()
    status = TrainingRun(config, problems, tmp_path, EventPublisher("epochs", sink),
                         scorer=FirstTokenRewardScorer("a"), model=model, tokenizer=tokenizer,
                         engine=CannedAnswersEngine(tokenizer, lambda prompt, index: "ab")).run()
    return status, sink


def test_a_run_in_epochs_trains_full_batches_of_each_shuffle_and_stops_after_the_last_epoch(tiny_policy, tmp_path):
    status, sink = run_in_epochs(tiny_policy, tmp_path, PROBLEMS)
    assert status is RunStatus.SUCCEEDED
    [started] = [e for e in sink.events if e.type == EventType.RUN_STARTED]
    assert started.payload["total_steps"] == 2 * (5 // 2) == verl_steps(5, 2, 2, None)
    assert [e.payload["step"] for e in sink.events if e.type == EventType.METRICS] == [1, 2, 3, 4]
    problems_at = {}
    for event in sink.events:
        if event.type == EventType.ROLLOUT_FINISHED:
            problems_at.setdefault(event.payload["step"], set()).add(event.payload["problem_id"])
    for epoch_steps in ((1, 2), (3, 4)):
        seen = [problems_at[step] for step in epoch_steps]
        assert all(len(batch) == 2 for batch in seen)
        assert not seen[0] & seen[1]  # no problem twice within an epoch; the fifth waits for a later shuffle


def test_an_epoch_without_a_full_batch_fails_the_run_with_what_to_change(tiny_policy, tmp_path):
    status, sink = run_in_epochs(tiny_policy, tmp_path, PROBLEMS[:1])
    assert status is RunStatus.FAILED
    reason = sink.events[-1].payload["reason"]
    assert "fewer than rollout.prompts_per_step" in reason and "schedule.total_steps" in reason
