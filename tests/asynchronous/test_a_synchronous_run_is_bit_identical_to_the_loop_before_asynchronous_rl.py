"""η = 0 (rollout.max_staleness, the default and the h100x8 preset's) is the release's synchronous loop exactly:
the same answers, losses, gradient norms and weights, bit for bit, as recorded before asynchronous RL existed.

Bit for bit on the kernel set the record was made with: the answers and rewards are the same on every x86 CPU,
the float32 losses and weights are recorded per kernel set (tests/asynchronous/synchronous_loop.py says why)."""

from __future__ import annotations

import json

import pytest

from tests.asynchronous.synchronous_loop import RECORD_DIR, kernel_set, record_path, run_synchronous_loop, stable_part

RECORDS = sorted(RECORD_DIR.glob("synchronous_loop.*.json"))


@pytest.fixture(scope="module")
def three_steps(smollm2_tokenizer_once):
    return run_synchronous_loop(smollm2_tokenizer_once)


def test_there_is_a_record_for_each_kernel_set_the_project_runs_on():
    assert {path.name for path in RECORDS} >= {record_path("AVX512").name, record_path("AVX2").name}


def test_every_kernel_sets_record_samples_the_same_answers_and_rewards():
    assert len({json.dumps(stable_part(json.loads(path.read_text()))) for path in RECORDS}) == 1


def test_three_synchronous_steps_sample_the_recorded_answers_and_rewards(three_steps):
    assert stable_part(three_steps) == stable_part(json.loads(RECORDS[0].read_text()))


def test_three_synchronous_steps_reproduce_this_kernel_sets_losses_and_weights_bit_for_bit(three_steps):
    path = record_path()
    if not path.exists():
        pytest.skip(f"no record for ATen's {kernel_set()} kernels (records: {[p.name for p in RECORDS]}); "
                    f"the answers and rewards were still checked")
    assert three_steps == json.loads(path.read_text()), (
        "the synchronous loop's numbers changed; if that is meant, rewrite them with "
        "`python -m tests.asynchronous.synchronous_loop` on every kernel set and say why in the commit")
