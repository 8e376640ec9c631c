"""The SFT loss is the mean negative log-likelihood of the assistant's tokens, and nothing else."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.sft.conftest import nat_sum_problems, tiny_config
from trainer.learning.learner import learning_rate_at
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.prompts import first_attempt_messages, render_prompt
from trainer.sft.training import (
    SupervisedFineTuning,
    assistant_token_nll,
    build_examples,
    conversation_examples,
    conversation_from_row,
    load_demonstrations,
)


def test_the_loss_is_the_summed_answer_token_nll_over_the_batchs_answer_tokens():
    logprobs = torch.log(torch.tensor([[0.5, 0.25, 0.9], [0.125, 0.9, 0.9]]))  # (B=2, R=3)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])  # padding after each answer
    loss = assistant_token_nll(logprobs, mask, token_count=3)
    assert loss.item() == pytest.approx((math.log(2) + math.log(4) + math.log(8)) / 3)


def test_a_batch_without_answer_tokens_is_refused():
    with pytest.raises(ValueError, match="token_count must be positive"):
        assistant_token_nll(torch.zeros(1, 1), torch.zeros(1, 1), token_count=0)


def test_each_assistant_turn_is_one_example_conditioned_on_everything_before_it(tokenizer):
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "Lean says: error"},
        {"role": "assistant", "content": "second answer"},
    ]
    first, second = conversation_examples(tokenizer, messages)
    assert first.prompt_ids == tokenizer(render_prompt(tokenizer, messages[:2]), add_special_tokens=False)["input_ids"]
    assert second.prompt_ids == tokenizer(render_prompt(tokenizer, messages[:4]), add_special_tokens=False)["input_ids"]
    # The targets are the answer's own tokens and the end-of-turn token the rollout engine stops at.
    assert first.completion_ids == tokenizer("first answer", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    assert tokenizer.decode(second.completion_ids, skip_special_tokens=True) == "second answer"


def test_a_formal_statement_row_is_trained_under_exactly_the_rl_prompt(tokenizer):
    (problem,) = nat_sum_problems([(2, 3)])
    row = {**problem.to_dict(), "response": "<think>x</think>"}
    messages = conversation_from_row(row, "row 1")
    assert messages[:-1] == first_attempt_messages(problem)
    assert messages[-1] == {"role": "assistant", "content": "<think>x</think>"}


@pytest.mark.parametrize("row, complaint", [
    ({"formal_statement": "theorem t : (1 : ℕ) = 1 := by"}, "needs 'messages'"),
    ({"formal_statement": "theorem t : (1 : ℕ) = 1 := by", "response": " "}, "'response' must be a non-empty string"),
    ({"messages": [{"role": "user", "content": "hi"}]}, "no assistant message"),
    ({"messages": [{"role": "robot", "content": "hi"}]}, "role 'robot'"),
    ({"formal_statement": "theorem t : (1 : ℕ) = 1 := by rfl", "response": "a"}, "must end in ':= by'"),
])
def test_malformed_rows_are_refused_with_their_line_and_what_to_fix(tmp_path, row, complaint):
    path = tmp_path / "demonstrations.jsonl"
    path.write_text("\n" + json.dumps(row) + "\n")
    with pytest.raises(ValueError, match="line 2") as error:
        load_demonstrations(path)
    assert complaint in str(error.value)


def test_turns_longer_than_the_token_limit_are_dropped_and_counted(tokenizer):
    short = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    long = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "word " * 300}]
    examples, dropped = build_examples(tokenizer, [short, long], max_sequence_tokens=100)
    assert (len(examples), dropped) == (1, 1)


def test_the_learning_rate_warms_up_linearly_and_then_stays_constant():
    assert [learning_rate_at(step, 1.0, 4) for step in (1, 2, 4, 5, 50)] == [0.25, 0.5, 1.0, 1.0, 1.0]
    assert learning_rate_at(1, 3e-4, 0) == 3e-4


def test_a_training_step_reports_the_nll_of_the_answer_tokens_alone(tiny_policy, tmp_path):
    model, tokenizer = tiny_policy(seed=1)
    messages = [{"role": "user", "content": "Prove it."}, {"role": "assistant", "content": "<think>ok</think>"}]
    (example,) = conversation_examples(tokenizer, messages)
    # The expected value, computed from one full forward pass: log-probs of the answer positions only.
    ids = torch.tensor([example.prompt_ids + example.completion_ids])
    with torch.no_grad():
        log_probs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
    targets = ids[0, 1:]
    answer_positions = range(len(example.prompt_ids) - 1, ids.shape[1] - 1)
    expected = -sum(log_probs[position, targets[position]].item() for position in answer_positions) / len(answer_positions)

    config = tiny_config(sft={"learning_rate": 1e-3, "epochs": 1, "batch_sequences": 1, "micro_batch_sequences": 1})
    sink = ListSink()
    run = SupervisedFineTuning(config, [messages], tmp_path, EventPublisher("sft", sink), model=model,
                               tokenizer=tokenizer, install_signal_handlers=False)
    assert run.run().value == "succeeded", sink.of_type(EventType.ERROR)
    (metrics,) = sink.of_type(EventType.METRICS)
    assert metrics.payload["values"]["sft_loss"] == pytest.approx(expected, rel=1e-4)
    assert metrics.payload["values"]["tokens"] == len(example.completion_ids)


def test_a_resumed_run_continues_after_its_last_checkpoint(tiny_policy, tmp_path):
    messages = [[{"role": "user", "content": f"q{index}"}, {"role": "assistant", "content": f"a{index}"}] for index in range(4)]

    def run(epochs: int, resume: bool) -> ListSink:
        model, tokenizer = tiny_policy(seed=2)
        config = tiny_config(sft={"epochs": epochs, "batch_sequences": 2, "checkpoint_every": 1})
        sink = ListSink()
        status = SupervisedFineTuning(config, messages, tmp_path, EventPublisher("sft", sink), model=model,
                                      tokenizer=tokenizer, resume=resume, install_signal_handlers=False).run()
        assert status.value == "succeeded", sink.of_type(EventType.ERROR)
        return sink

    run(epochs=1, resume=False)
    resumed = run(epochs=2, resume=True)
    assert [event.payload["step"] for event in resumed.of_type(EventType.METRICS)] == [3, 4]
    assert resumed.of_type(EventType.RUN_STARTED)[0].payload["resumed_from_step"] == 2
