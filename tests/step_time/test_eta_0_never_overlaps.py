"""η = 0 never overlaps anything: a batch is generated only after the previous step's sync, on any layout."""

from __future__ import annotations

from tests.step_time.helpers import hand_inputs
from trainer.step_time.simulation import AnswerLengths, LeanLatency, Layout, simulate


def test_generation_and_lean_of_a_batch_start_after_the_previous_step_ended():
    inputs = hand_inputs(rollouts_per_step=32, concurrent_sequences_per_device=8,
                         answer_tokens=AnswerLengths(100, sigma=1.0, max_tokens=400),
                         lean_latency=LeanLatency(3, 1.0, 0.05), lean_max_in_flight=4)
    for layout in (Layout(True, 1, 1), Layout(False, 3, 5), Layout(True, 8, 8)):
        for seed in range(5):
            batches = simulate(inputs, 0, layout, steps=8, seed=seed).batches
            for batch, following in zip(batches, batches[1:]):
                assert following.generation[0] >= batch.step_end_s
                assert following.lean[0] >= batch.step_end_s
                assert following.learning[0] >= following.ready_s
            assert all(batch.staleness == 0 for batch in batches)
