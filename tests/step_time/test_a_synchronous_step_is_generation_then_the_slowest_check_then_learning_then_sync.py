"""η = 0 is the synchronous loop: a step is its generation, the wait for Lean's last verdict, the learner and
the weight sync, one after the other; hand-computed cases reproduced exactly."""

from __future__ import annotations

import pytest

from tests.step_time.helpers import hand_inputs
from trainer.step_time.simulation import AnswerLengths, LeanLatency, Layout, simulate

SHARED = Layout(shared=True, generation_devices=1, learner_devices=1)


def test_a_deterministic_step_is_the_sum_of_its_phases():
    result = simulate(hand_inputs(), 0, SHARED, steps=5)
    assert result.step_time_s == pytest.approx(10 + 5 + 8 + 2)
    assert [batch.step_end_s for batch in result.batches] == pytest.approx([25, 50, 75, 100, 125])
    first = result.batches[0]
    assert first.generation == pytest.approx((0, 10))
    assert first.lean == pytest.approx((10, 15))
    assert first.learning == pytest.approx((15, 23))
    assert first.sync == pytest.approx((23, 25))


def test_the_step_waits_for_the_slowest_check_which_is_the_timeout():
    every_check_times_out = hand_inputs(lean_latency=LeanLatency(5.0, timeout_share=1.0), lean_timeout_s=20.0)
    assert simulate(every_check_times_out, 0, SHARED, steps=3).step_time_s == pytest.approx(10 + 20 + 8 + 2)


def test_answers_failing_the_format_check_never_wait_for_lean():
    none_reach_lean = hand_inputs(lean_reach_share=0.0)
    result = simulate(none_reach_lean, 0, SHARED, steps=3)
    assert result.step_time_s == pytest.approx(10 + 8 + 2)
    assert result.batches[0].lean is None


def test_continuous_batching_refills_slots_and_lean_checks_wait_for_a_free_slot():
    # 2 slots at 10 tokens/s: answers of 10 and 30 tokens start at once; the 20-token answer takes the slot
    # freed at 1 s (done at 3 s), the 40-token one the next freed at 3 s (done at 7 s). One Lean slot, 2 s a
    # check: verdicts at 3, 5, 7, 9 s. The learner reads 100 tokens at 50 tokens/s (2 s), the sync 1 s: 12 s.
    inputs = hand_inputs(answer_tokens=LengthsInTurn((10, 30, 20, 40)), concurrent_sequences_per_device=2,
                         lean_latency=LeanLatency(2.0), lean_max_in_flight=1, weight_sync_s=1.0)
    result = simulate(inputs, 0, SHARED, steps=2)
    first = result.batches[0]
    assert first.generation == pytest.approx((0, 7))
    assert first.lean == pytest.approx((1, 9))
    assert first.learning == pytest.approx((9, 11))
    assert first.step_end_s == pytest.approx(12)


def test_prefill_and_bookkeeping_add_to_every_synchronous_step():
    result = simulate(hand_inputs(prefill_s=1.5, step_overhead_s=0.5), 0, SHARED, steps=4)
    assert result.step_time_s == pytest.approx(1.5 + 10 + 5 + 8 + 2 + 0.5)


def test_the_synchronous_loop_leaves_the_devices_idle_while_lean_checks():
    result = simulate(hand_inputs(), 0, SHARED, steps=4)
    assert result.devices_idle_share == pytest.approx(5 / 25)
    assert result.generation_idle_share == pytest.approx(15 / 25)
    assert result.learner_idle_share == pytest.approx(15 / 25)


class LengthsInTurn(AnswerLengths):
    """Answers of exactly these lengths, in this order, batch after batch (instead of drawn)."""

    def __init__(self, lengths):
        super().__init__(mean_tokens=sum(lengths) / len(lengths))
        object.__setattr__(self, "lengths", lengths)
        object.__setattr__(self, "drawn", 0)

    def draw(self, stream):
        object.__setattr__(self, "drawn", self.drawn + 1)
        return self.lengths[(self.drawn - 1) % len(self.lengths)]
