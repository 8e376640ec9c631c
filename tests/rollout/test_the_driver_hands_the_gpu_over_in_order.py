"""The driver's own learner ↔ vLLM hand-over, run against the stand-in vLLM: every call, in order.

What one GPU must see each step: the learner step with vLLM asleep (weights and cache
discarded, level 2), PyTorch's cached blocks returned, then vLLM's weights alone woken
and overwritten, and only then its key/value cache woken, for the next generation.
"""

from __future__ import annotations

import pytest
import torch

from tests.learning.conftest import FirstTokenRewardScorer
from tests.rollout.test_vllm_engine_with_a_stand_in import gpu_config
from trainer.learning.batching import TrainingSequence
from trainer.loop.driver import BackgroundEventLoop, TrainingRun
from trainer.observability.events import EventPublisher, ListSink
from trainer.recipe.problems import Problem
from trainer.recipe.rollouts import PromptSlot
from trainer.rollout.vllm_engine import VllmEngine

PROBLEM = Problem(problem_id="p1", formal_statement="theorem t : 1 + 1 = 2 := by")


class RecordingLearner:
    """Stands in for the learner: writes its step into the same log as the stand-in vLLM."""

    def __init__(self, log: list):
        self.log = log

    def step(self, sequences):
        self.log.append(("learner_step", len(sequences)))
        return {"loss": 0.0}


@pytest.fixture
def run(fake_vllm, random_llama, tokenizer, tmp_path, monkeypatch):
    engine = VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    log = fake_vllm.instances[0].log
    training = TrainingRun(gpu_config(), [PROBLEM], tmp_path, EventPublisher("r", ListSink()),
                           scorer=FirstTokenRewardScorer("go"), model=random_llama, tokenizer=tokenizer,
                           engine=engine, install_signal_handlers=False)
    training.learner = RecordingLearner(log)
    training.events_loop = BackgroundEventLoop()
    # This machine has no GPU: make the allocator's release visible in the same log.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: log.append(("torch.cuda.empty_cache",)))
    del log[:]
    yield training, log
    training.events_loop.close()


def calls(log: list) -> list[tuple]:
    return [entry[:1] if entry[0] in ("add_request", "load_weights") else entry for entry in log]


def test_a_step_runs_learner_then_frees_its_cache_then_weights_then_cache_then_generation(run, random_llama):
    training, log = run
    slot = PromptSlot(PROBLEM, [], "theorem go", [5, 6], "first", None)
    list(training.roll_out_and_verify([slot], step=1))  # the previous step's generation
    timings: dict = {}
    sequence = TrainingSequence(prompt_ids=[5, 6], response_ids=[7], advantage=1.0)
    training.update_policy([sequence], timings)
    training.roll_out_and_verify([slot], step=2)

    order = calls(log)
    first_generation_end = order.index(("add_request",)) + 1
    assert order[first_generation_end:first_generation_end + 7] == [
        ("sleep", 2),  # weights are replaced after the step anyway: none kept in host memory
        ("learner_step", 1),
        ("torch.cuda.empty_cache",),  # PyTorch's cached blocks back to the device before vLLM wakes
        ("wake_up", ("weights",)),  # weights alone: the cache is not needed to load them
        ("load_weights",),
        ("reset_prefix_cache",),  # cached prefixes were computed by the old weights
        ("wake_up", ("kv_cache",)),
    ]
    assert order[first_generation_end + 7] == ("add_request",)
    assert set(timings) == {"learning_s", "weight_sync_s"}


def test_generation_sends_the_slots_token_ids_not_its_text(run):
    training, log = run
    slot = PromptSlot(PROBLEM, [], "text vLLM would tokenize its own way", [9, 8, 7], "first", None)
    training.roll_out_and_verify([slot], step=1)
    assert [entry[2] for entry in log if entry[0] == "add_request"] == [{"prompt_token_ids": [9, 8, 7]}]
