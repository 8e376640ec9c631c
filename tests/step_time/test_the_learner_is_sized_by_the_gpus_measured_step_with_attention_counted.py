"""h100x8's learner rate comes from deploy/gpu_check.py's learner steps on a GPU (docs/operations/gpu-checks), read
from their files, and a sequence's learner work grows with its length (attention), as that step measured it."""

import json

import pytest

from tests.step_time.helpers import hand_inputs
from trainer.step_time import inputs
from trainer.step_time.simulation import Layout, learner_work, simulate


def test_a_sequences_work_grows_with_its_length_and_without_attention_is_its_tokens():
    assert learner_work(hand_inputs(), [100, 300]) == 400
    with_attention = hand_inputs(learner_attention_per_context_token=1e-3, prompt_tokens_mean=100)
    assert learner_work(with_attention, [100, 300]) == pytest.approx(200 * 1.2 + 400 * 1.4)


def test_attention_lengthens_the_synchronous_steps_learner_phase_by_hand():
    # 4 answers of 100 tokens, each 100 × (1 + 100 × 1e-3) = 110 tokens of work: 440 / 50 tokens/s = 8.8 s.
    shared = Layout(shared=True, generation_devices=1, learner_devices=1)
    result = simulate(hand_inputs(learner_attention_per_context_token=1e-3), 0, shared, steps=3)
    assert result.step_time_s == pytest.approx(10 + 5 + 8.8 + 2)


def test_the_utilisation_is_the_mean_of_the_gpu_checks_learner_steps_with_attention_counted():
    share, source = inputs.measured_learner_utilisation()
    assert share == pytest.approx((0.346 + 0.380) / 2, abs=2e-3)
    assert "34.6%, 38.0% in 2 runs" in source and source.startswith("measured: deploy/gpu_check.py")


def test_a_failed_learner_step_is_not_read_and_none_at_all_is_a_clear_error(tmp_path, monkeypatch):
    checks = tmp_path / inputs.GPU_CHECKS
    checks.mkdir(parents=True)
    monkeypatch.setattr(inputs, "REPOSITORY", tmp_path)
    (checks / "failed.json").write_text(json.dumps({"checks": {"learner_step": {"outcome": "failed"}}}))
    with pytest.raises(inputs.CommandError, match="holds no passed learner step"):
        inputs.measured_learner_utilisation()
    (checks / "passed.json").write_text(json.dumps({"checks": {"learner_step": {
        "outcome": "passed", "tokens": 49152, "tokens_per_second": 7164.1}}}))
    share, source = inputs.measured_learner_utilisation()
    assert share == pytest.approx(0.346, abs=1e-3) and "in 1 runs" in source
