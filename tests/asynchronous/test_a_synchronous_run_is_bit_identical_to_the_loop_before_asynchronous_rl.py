"""η = 0 (rollout.max_staleness, the default and the h100x8 preset's) is the release's synchronous loop exactly:
the same answers, losses, gradient norms and weights, bit for bit, as recorded before asynchronous RL existed."""

from __future__ import annotations

import json

from tests.asynchronous.synchronous_loop import RECORD, run_synchronous_loop


def test_three_synchronous_steps_reproduce_the_recorded_answers_losses_and_weights_bit_for_bit(smollm2_tokenizer_once):
    recorded = json.loads(RECORD.read_text())
    assert run_synchronous_loop(smollm2_tokenizer_once) == recorded, (
        "the synchronous loop's numbers changed; if that is meant, rewrite them with "
        "`python -m tests.asynchronous.synchronous_loop` and say why in the commit")
