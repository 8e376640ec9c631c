"""deploy/gpu_check.py as a whole: the checks the GPU day needs, each on its own, and a last line that says
which passed. What runs without a GPU is run here; the rest waits for the day one is lent."""

from __future__ import annotations

import argparse
import time

import pytest

from deploy import gpu_check


def test_it_checks_what_one_gpu_can_show_in_order():
    assert [name for name, _ in gpu_check.CHECKS] == [
        "cuda_fail_fast", "bfloat16", "fsdp2_on_nccl", "learner_step", "packed_attention", "transformers_engine"]


def test_a_failed_check_does_not_stop_the_next_and_none_starts_past_the_deadline():
    def passes(context):
        return {"figure": 1}

    def fails(context):
        raise gpu_check.CheckFailed("the plan was off by 40%")

    def crashes(context):
        raise RuntimeError("CUDA error: out of memory")

    results = {}
    gpu_check.run_checks([("first", passes), ("second", fails), ("third", crashes), ("fourth", passes)], {},
                         results, started=time.perf_counter())
    assert [results[name]["outcome"] for name in ("first", "second", "third", "fourth")] == [
        "passed", "failed", "failed", "passed"]
    assert results["first"]["figure"] == 1 and results["second"]["reason"] == "the plan was off by 40%"
    assert results["third"]["reason"] == "RuntimeError: CUDA error: out of memory"

    late = {}
    gpu_check.run_checks([("late", passes)], {}, late, started=time.perf_counter() - 600, deadline_s=480)
    assert late["late"]["outcome"] == "skipped" and "of the 480 s allowed" in late["late"]["reason"]


def test_its_last_line_names_the_checks_that_passed_failed_and_were_skipped():
    line = gpu_check.summary_line({"bfloat16": {"outcome": "passed"}, "learner_step": {"outcome": "failed"},
                                   "fsdp2_on_nccl": {"outcome": "passed"}, "transformers_engine": {"outcome": "skipped"}})
    assert line == ("gpu_check: 2/4 checks passed; passed 2 (bfloat16, fsdp2_on_nccl); failed 1 (learner_step); "
                    "skipped 1 (transformers_engine)")


def test_its_cuda_fail_fast_check_passes_on_a_machine_without_cuda():
    figures = gpu_check.check_cuda_fail_fast({})
    assert figures["exit_code"] != 0 and "no working CUDA" in figures["reason"]


def test_its_weight_push_check_sees_the_gap_close_on_a_tiny_bfloat16_copy(tiny_policy):
    from tests.learning.conftest import tiny_run_config
    from trainer.learning.learner import Learner

    model, tokenizer = tiny_policy()
    config = tiny_run_config(model={"dtype": "bfloat16"})  # a bfloat16 copy samples, as on the GPU
    arguments = argparse.Namespace(generate_tokens=8, samples=2, prompts=2)
    figures = gpu_check.check_transformers_engine({"args": arguments, "config": config, "tokenizer": tokenizer,
                                                   "learner": Learner(config, model, tokenizer)})
    gap = figures["gap"]
    assert gap["closed_by_the_push"] >= gpu_check.MIN_GAP_CLOSED


def test_its_push_is_judged_against_the_gap_at_the_start_not_against_zero():
    # The H200's figures of 2026-12-04 (random Qwen3-1.7B weights, a bfloat16 copy): a 0.118-nat gap at the start,
    # which a rule of "half the stale gap" called a failed push although the push restored it.
    assert gpu_check.share_of_the_gap_closed(fresh=0.1181, stale=0.2120, pushed=0.1202) == pytest.approx(0.978, abs=1e-3)
    with pytest.raises(gpu_check.CheckFailed, match="closed 2% of the gap"):
        gpu_check.share_of_the_gap_closed(fresh=0.1181, stale=0.2120, pushed=0.2100)
    with pytest.raises(gpu_check.CheckFailed, match="too little to tell"):
        gpu_check.share_of_the_gap_closed(fresh=0.1181, stale=0.1250, pushed=0.1181)


def test_its_only_option_runs_the_named_checks_in_the_usual_order():
    assert [name for name, _ in gpu_check.chosen_checks(["transformers_engine", "learner_step"])] == [
        "learner_step", "transformers_engine"]
    assert gpu_check.chosen_checks(None) == gpu_check.CHECKS


@pytest.fixture
def tiny_policy(smollm2_tokenizer_once):
    import copy

    from trainer.learning.models import tiny_random_policy

    return lambda seed=0: tiny_random_policy(seed, tokenizer=copy.deepcopy(smollm2_tokenizer_once))


@pytest.fixture(scope="module")
def smollm2_tokenizer_once():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()
