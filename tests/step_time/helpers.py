"""Inputs for hand-computable cases: deterministic unless a test says otherwise."""

from __future__ import annotations

from trainer.step_time.simulation import AnswerLengths, LeanLatency, StepTimeInputs


def hand_inputs(**changes) -> StepTimeInputs:
    """4 answers of 100 tokens decoded at once at 10 tokens/s (10 s), Lean 5 s each, the learner 400 tokens
    at 50 tokens/s (8 s), a 2 s sync: a synchronous step is 10 + 5 + 8 + 2 = 25 s."""
    values = dict(
        rollouts_per_step=4, answer_tokens=AnswerLengths(100), decode_tokens_per_s_per_sequence=10,
        concurrent_sequences_per_device=4, prefill_s=0.0, lean_latency=LeanLatency(5.0), lean_timeout_s=60.0,
        lean_max_in_flight=8, lean_reach_share=1.0, learner_tokens_per_s_per_device=50.0, prompt_tokens_mean=0.0,
        learner_fixed_s=0.0, weight_sync_s=2.0, step_overhead_s=0.0,
    )
    values.update(changes)
    return StepTimeInputs(**values)
