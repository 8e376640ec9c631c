"""Every trained rollout's token records, written and read back, hold the figures the learner's loss used: π_old
(the ratio's denominator), the advantage, the engine's log-probabilities, the loss weight (mask × truncated
importance weight) and which tokens a clip bound or the cap changed; and the entropy of π_old's distribution."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.learning.conftest import tiny_run_config
from trainer.learning import learner as learner_module
from trainer.learning.batching import TrainingSequence
from trainer.learning.learner import Learner
from trainer.observability import token_records

CONTEXT = [False, False, True, True, False, False]


def sequences(engine_logprobs: list[list[float]]) -> list[TrainingSequence]:
    return [
        TrainingSequence([11, 12, 13], [21, 22, 31, 32, 33, 23], 0.75, "p0", "s1-p0-r0", engine_logprobs[0], CONTEXT),
        TrainingSequence([11, 12, 13], [24, 25, 26], -0.75, "p0", "s1-p0-r1", engine_logprobs[1]),
        TrainingSequence([14, 15], [27, 28, 29, 30], 0.5, "p1", "s1-p1-r0", engine_logprobs[2]),
        TrainingSequence([14, 15], [34, 35], -0.5, "p1", "s1-p1-r1", engine_logprobs[3]),
        TrainingSequence([14, 15], [36, 37, 38], 0.0, "p1", "s1-p1-r2", engine_logprobs[4]),  # scored, never trained
    ]


@pytest.fixture
def trained_step(tiny_policy, tmp_path, monkeypatch):
    """One asynchronous learner step (two mini-batches, a large learning rate, so the second one clips), with
    what its loss received read off the loss functions themselves; its records written and read back."""
    config = tiny_run_config(rollout={"prompts_per_step": 2, "max_staleness": 1},
                             optimizer={"learning_rate": 0.5, "mini_batch_prompts": 1, "micro_batch_sequences": 8})
    model, tokenizer = tiny_policy(seed=3)
    reference = copy.deepcopy(model)  # π_old: the weights the step starts from
    learner = Learner(config, model, tokenizer)
    seen = {"loss": [], "weights": [], "batches": []}
    clipped_token_loss, importance = learner_module.clipped_token_loss, learner_module.behaviour_importance_weights
    make_batch = learner._batch

    def spy_loss(logprobs, old, advantages, *bounds):
        seen["loss"].append((logprobs.detach().clone(), old.clone(), advantages.clone(), bounds))
        return clipped_token_loss(logprobs, old, advantages, *bounds)

    def spy_weights(*args):
        seen["weights"].append(importance(*args))
        return seen["weights"][-1]

    def spy_batch(micro):
        batch = make_batch(micro)
        seen["batches"].append((list(micro), batch))
        return batch

    monkeypatch.setattr(learner_module, "clipped_token_loss", spy_loss)
    monkeypatch.setattr(learner_module, "behaviour_importance_weights", spy_weights)
    monkeypatch.setattr(learner, "_batch", spy_batch)
    # The engine's figures: a few far below π_old (weights capped at 2), the rest near it.
    lengths = [6, 3, 4, 2, 3]
    engine = [[-30.0 if index % 3 == 0 else -11.0 for index in range(length)] for length in lengths]
    batch_of_sequences = sequences(engine)
    learner.step(batch_of_sequences)
    path = token_records.write_step_records(tmp_path, 1, 1, learner.token_records,
                                            token_records.TokenTexts(tokenizer))
    read = {s.rollout_key: token_records.read_rollout(tmp_path, 1, 1, s.rollout_key) for s in batch_of_sequences}
    return {"sequences": batch_of_sequences, "seen": seen, "read": read, "reference": reference, "path": path,
            "tokenizer": tokenizer, "config": config}


def loss_inputs_by_key(trained_step) -> dict[str, dict]:
    """For each trained sequence: the π_old, π_θ and advantage the loss received, and its importance weight."""
    by_key = {}
    training_batches = [(micro, batch) for micro, batch in trained_step["seen"]["batches"]
                        if all(s.advantage != 0.0 for s in micro)][-len(trained_step["seen"]["loss"]):]
    for (micro, batch), (logprobs, old, advantages, bounds), weights in zip(
            training_batches, trained_step["seen"]["loss"], trained_step["seen"]["weights"]):
        for sequence, old_values, new_values, weight in zip(
                micro, batch.per_sequence(old), batch.per_sequence(logprobs), batch.per_sequence(weights)):
            by_key[sequence.rollout_key] = {"old": old_values, "new": new_values, "weight": weight, "bounds": bounds,
                                            "advantage": sequence.advantage}
    return by_key


def test_pi_old_and_the_advantage_are_the_ones_the_loss_received_bit_for_bit(trained_step):
    used = loss_inputs_by_key(trained_step)
    assert set(used) == {"s1-p0-r0", "s1-p0-r1", "s1-p1-r0", "s1-p1-r1"}
    for key, inputs in used.items():
        record = trained_step["read"][key]
        assert record["learner_logprob"] == inputs["old"].tolist()
        assert record["advantage"] == inputs["advantage"]


def test_the_engines_figures_are_stored_and_left_empty_at_lean_s_reply(trained_step):
    first = trained_step["read"]["s1-p0-r0"]
    assert first["engine_logprob"] == [None if flag else value
                                       for value, flag in zip(trained_step["sequences"][0].sampled_logprobs, CONTEXT)]
    assert first["flags"][2] & token_records.IS_CONTEXT and first["flags"][3] & token_records.IS_CONTEXT
    assert first["loss_weight"][2:4] == [0.0, 0.0]


def test_the_loss_weight_is_the_mask_times_the_truncated_importance_weight_and_the_cap_is_marked(trained_step):
    capped = 0
    for key, inputs in loss_inputs_by_key(trained_step).items():
        record = trained_step["read"][key]
        context = CONTEXT if key == "s1-p0-r0" else [False] * len(record["flags"])
        expected = [0.0 if flag else float(weight) for weight, flag in zip(inputs["weight"], context)]
        torch.testing.assert_close(torch.tensor(record["loss_weight"]), torch.tensor(expected), rtol=1e-3, atol=1e-3)
        for weight, flag, is_context in zip(inputs["weight"], record["flags"], context):
            is_capped = bool(flag & token_records.IS_CAPPED)
            assert is_capped == (not is_context and float(weight) >= 2.0)
            capped += is_capped
    assert capped > 0


def test_the_clip_flags_are_the_tokens_the_clip_bounds_silenced(trained_step):
    clipped = 0
    for key, inputs in loss_inputs_by_key(trained_step).items():
        record = trained_step["read"][key]
        low, high, dual = inputs["bounds"]
        ratio = torch.exp(inputs["new"] - inputs["old"])
        advantage = inputs["advantage"]
        context = CONTEXT if key == "s1-p0-r0" else [False] * len(record["flags"])
        for value, flag, is_context in zip(ratio.tolist(), record["flags"], context):
            expected = 0 if is_context else (
                (token_records.IS_CLIPPED_LOW if advantage < 0 and value < 1 - low else 0)
                | (token_records.IS_CLIPPED_HIGH if advantage > 0 and value > 1 + high else 0)
                | (token_records.IS_DUAL_CLIPPED if advantage < 0 and value > dual else 0))
            assert flag & ~(token_records.IS_CAPPED | token_records.IS_CONTEXT) == expected
            clipped += expected != 0
    assert clipped > 0  # the second mini-batch moved far enough from π_old to clip


def test_the_entropy_is_pi_olds_over_the_whole_vocabulary(trained_step):
    reference, config = trained_step["reference"], trained_step["config"]
    for sequence in trained_step["sequences"]:
        ids = torch.tensor([[*sequence.prompt_ids, *sequence.response_ids]])
        with torch.no_grad():
            logits = reference(input_ids=ids).logits[0, len(sequence.prompt_ids) - 1 : -1].float()
        log_probs = torch.log_softmax(logits / config.rollout.temperature, dim=-1)
        expected = -(log_probs.exp() * log_probs).sum(dim=-1)
        stored = torch.tensor(trained_step["read"][sequence.rollout_key]["entropy"])
        torch.testing.assert_close(stored, expected, rtol=2e-3, atol=2e-3)  # float16 on disk


def test_an_untrained_answer_is_recorded_with_its_zero_advantage_and_no_clip(trained_step):
    record = trained_step["read"]["s1-p1-r2"]
    assert record["advantage"] == 0.0 and record["flags"] == [0, 0, 0]
    assert record["token_texts"] == [trained_step["tokenizer"].decode([token]) for token in [36, 37, 38]]


def test_a_rollout_the_step_did_not_train_has_no_records(trained_step, tmp_path):
    assert token_records.read_rollout(tmp_path, 1, 1, "s1-p9-r0") is None
    assert token_records.read_rollout(tmp_path, 2, 1, "s1-p0-r0") is None
