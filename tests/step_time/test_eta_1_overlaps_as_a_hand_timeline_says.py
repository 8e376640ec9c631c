"""With η ≥ 1 the generator goes on while the learner updates, but never with weights more than η updates
older than those the batch is trained after; hand-drawn timelines reproduced exactly.

The cast: generation 10 s, Lean 5 s, learning 8 s, sync 2 s (tests/step_time/helpers.py).
"""

from __future__ import annotations

import pytest

from tests.step_time.helpers import hand_inputs
from trainer.step_time.simulation import Layout, simulate

SPLIT = Layout(shared=False, generation_devices=1, learner_devices=1)
SHARED = Layout(shared=True, generation_devices=1, learner_devices=1)


def test_on_split_pools_eta_1_generates_the_next_batch_while_the_learner_learns():
    # batch 1: generated 0–10, checked by 15, learned 15–23, synced by 25.
    # batch 2: generated 10–20 with version 0 (1 update old), ready 25, learned at once: ends 35.
    # batch 3 needs version ≥ 1 (synced at 25): generated 25–35, ready 40, ends 50.
    # batch 4 needs version 2 (35): generated 35–45, ready 50, ends 60; and so on, 10 and 15 s in turn.
    result = simulate(hand_inputs(), 1, SPLIT, steps=6)
    assert [batch.step_end_s for batch in result.batches] == pytest.approx([25, 35, 50, 60, 75, 85])
    assert [batch.generation[0] for batch in result.batches] == pytest.approx([0, 10, 25, 35, 50, 60])
    assert [batch.policy_version for batch in result.batches] == [0, 0, 1, 2, 3, 4]
    assert [batch.staleness for batch in result.batches] == [0, 1, 1, 1, 1, 1]
    assert result.step_time_s == pytest.approx(85 / 6)


def test_on_split_pools_eta_2_runs_at_the_pace_of_the_slower_pool():
    result = simulate(hand_inputs(), 2, SPLIT, steps=6)
    assert [batch.step_end_s for batch in result.batches] == pytest.approx([25, 35, 45, 55, 65, 75])
    assert max(batch.staleness for batch in result.batches) == 2
    # Once full, the learner never waits (10 s a step: learning and sync) and the generator never stops.
    assert result.mean_interval_after(2) == pytest.approx(10)


def test_on_shared_devices_generation_and_learning_share_them_at_half_speed_each():
    # batch 2 is generated from 10 s, alone until batch 1 is checked (15 s), then beside the learner at half
    # speed: its last 5 s of work take 10, so it ends at 25; the learner's 8 s + 2 s do 5 s of work by 25 and
    # the rest alone: 30. Batch 3 needs version 1 (30 s): it and step 2 share the devices 30–50; and so on,
    # 20 s a step (the devices' whole work), the last step alone.
    result = simulate(hand_inputs(), 1, SHARED, steps=6)
    assert [batch.step_end_s for batch in result.batches] == pytest.approx([30, 50, 70, 90, 110, 120])
    assert [batch.generation for batch in result.batches] == [
        pytest.approx(interval) for interval in ((0, 10), (10, 25), (30, 50), (50, 65), (70, 90), (90, 105))]
    assert result.batches[0].learning == pytest.approx((15, 28))
    assert result.batches[0].sync == pytest.approx((28, 30))
    assert [batch.staleness for batch in result.batches] == [0, 1, 1, 1, 1, 1]


def test_no_batch_is_ever_generated_by_weights_older_than_eta_allows():
    from tests.step_time.helpers import hand_inputs as inputs_for
    from trainer.step_time.simulation import AnswerLengths, LeanLatency

    heavy_tailed = inputs_for(answer_tokens=AnswerLengths(100, sigma=0.8), lean_latency=LeanLatency(5, 1.0, 0.1))
    for eta in range(4):
        for layout in (SPLIT, SHARED):
            for seed in range(5):
                result = simulate(heavy_tailed, eta, layout, steps=12, seed=seed)
                assert all(0 <= batch.staleness <= eta for batch in result.batches)
