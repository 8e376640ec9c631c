"""Checkpoints resume a run exactly, and export as a Hugging Face folder AutoModelForCausalLM loads."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from tests.learning.conftest import FirstTokenRewardScorer, tiny_run_config
from trainer.run.checkpoint import export_hf, latest_checkpoint
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.run.checkpoint import first_event_seq_for_resume
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.problems import Problem

PROBLEMS = [Problem(f"p{i}", f"theorem t{i} : ({i} : ℕ) + 1 = {i + 1} := by") for i in range(3)]


def config():
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 4, "max_response_tokens": 4, "top_k": 2},
        optimizer={"learning_rate": 1e-3, "mini_batch_prompts": 1, "micro_batch_sequences": 2},
        schedule={"total_steps": 2, "eval_every": 0, "checkpoint_every": 1},
    )


def train(tiny_policy, output, *, seed, resume):
    model, tokenizer = tiny_policy(seed=seed)
    sink = ListSink()
    first_seq = first_event_seq_for_resume(output) if resume else 0
    # Sampling from the top 2 first tokens, of which a newline is one: rewards are mixed, so every step learns.
    scorer = FirstTokenRewardScorer(tokenizer.decode([198]))
    status = TrainingRun(config(), PROBLEMS, output, EventPublisher("resume", sink, first_seq=first_seq),
                         scorer=scorer, model=model, tokenizer=tokenizer, resume=resume).run()
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    return model, sink


@pytest.fixture(scope="module")
def uninterrupted_and_resumed(tmp_path_factory, smollm2_tokenizer_once):
    import copy

    from trainer.learning.models import tiny_random_policy

    def tiny_policy(seed):
        return tiny_random_policy(seed, tokenizer=copy.deepcopy(smollm2_tokenizer_once))

    straight = tmp_path_factory.mktemp("straight")
    model_a, sink_a = train(tiny_policy, straight, seed=0, resume=False)
    # The interrupted run: the same folder as it was after step 1's checkpoint.
    interrupted = tmp_path_factory.mktemp("interrupted")
    shutil.copytree(straight / "checkpoints" / "step_000001", interrupted / "checkpoints" / "step_000001")
    # A different initial seed proves the weights come from the checkpoint.
    model_b, sink_b = train(tiny_policy, interrupted, seed=99, resume=True)
    return (model_a, sink_a), (model_b, sink_b), straight


def test_a_resumed_run_takes_the_same_next_step_as_the_uninterrupted_run(uninterrupted_and_resumed):
    (model_a, sink_a), (model_b, sink_b), _ = uninterrupted_and_resumed
    step2_a = [e.payload["values"] for e in sink_a.of_type(EventType.METRICS) if e.payload["step"] == 2][0]
    step2_b = [e.payload["values"] for e in sink_b.of_type(EventType.METRICS)]
    assert [e.payload["step"] for e in sink_b.of_type(EventType.STEP_STARTED)] == [2]
    assert step2_b[0]["learner/loss"] == step2_a["learner/loss"]
    assert step2_b[0]["reward/mean"] == step2_a["reward/mean"]
    assert step2_a["learner/trained_sequences"] > 0
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name


def test_a_resumed_run_numbers_its_events_after_the_checkpoint(uninterrupted_and_resumed):
    (_, sink_a), (_, sink_b), _ = uninterrupted_and_resumed
    saved_at_1 = [e for e in sink_a.of_type(EventType.CHECKPOINT_SAVED) if e.payload["step"] == 1][0]
    assert sink_b.events[0].seq == saved_at_1.seq + 1


def test_a_checkpoint_holds_the_resolved_config_and_the_step(uninterrupted_and_resumed):
    *_, straight = uninterrupted_and_resumed
    checkpoint = latest_checkpoint(straight)
    assert checkpoint.name == "step_000002"
    assert json.loads((checkpoint / "trainer_state.json").read_text())["step"] == 2
    assert json.loads((checkpoint / "run_config.json").read_text()) == config().to_json_dict()
    assert not [p for p in checkpoint.parent.iterdir() if p.name.startswith(".")], "no staging folder left behind"


def test_an_exported_checkpoint_loads_with_auto_model_for_causal_lm(uninterrupted_and_resumed, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    (model_a, _), _, straight = uninterrupted_and_resumed
    folder = export_hf(latest_checkpoint(straight), tmp_path / "hf")
    loaded = AutoModelForCausalLM.from_pretrained(folder)
    assert AutoTokenizer.from_pretrained(folder).eos_token == "<|im_end|>"
    for (name, a), b in zip(model_a.state_dict().items(), loaded.state_dict().values()):
        assert torch.equal(a, b), name


def test_export_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match="checkpoints/step_"):
        export_hf(tmp_path, tmp_path / "out")
