"""With retry.max_rounds = N, an evaluation reports "solved within r rounds of correction" for r = 1 … N beside
pass@k (Goedel-Prover-V2's "with self-correction"), on hand-made numbers: r = 0 is the plain pass@k, r = 1 the
release's one retry."""

from __future__ import annotations

import pytest

from trainer.loop.evaluation import Outcome, evaluation_report, rounds_report, with_one_retry, within_rounds


def test_a_sample_counts_as_solved_once_any_round_up_to_r_solves_it():
    first = [1.0, 0.0, 0.0, 0.0]
    chains = [[None, None, None], [1.0, None, None], [0.0, 0.0, 1.0], [0.0, 1.0, None]]
    assert within_rounds(first, chains, 1) == [1.0, 1.0, 0.0, 0.0]
    assert within_rounds(first, chains, 2) == [1.0, 1.0, 0.0, 1.0]
    assert within_rounds(first, chains, 3) == [1.0, 1.0, 1.0, 1.0]


def test_a_censored_first_attempt_stays_censored_and_a_censored_round_ends_its_chain():
    # The third round's success after a censored second round is not counted: that chain was never known to go on.
    assert within_rounds([None, 0.0], [[1.0, 1.0], [0.0, None, 1.0]], 3) == [None, 0.0]


def test_one_round_is_the_releases_one_retry():
    first, retries = [1.0, 0.0, 0.0, None], [None, 1.0, 0.0, 1.0]
    assert within_rounds(first, [[retry] for retry in retries], 1) == with_one_retry(first, retries)


def test_the_report_names_each_round_for_both_families_and_round_one_equals_the_retry_metrics():
    def outcome(reward, lean_valid=None):
        return Outcome(reward, reward if lean_valid is None else lean_valid)

    first = {"a": [outcome(0.0), outcome(0.0)], "b": [outcome(1.0), outcome(0.0, 1.0)]}
    chains = {"a": [[outcome(0.0), outcome(1.0)], [outcome(0.0), outcome(0.0)]],
              "b": [[None, None], [outcome(0.0), None]]}
    report = rounds_report(first, chains, 2)
    one_retry = evaluation_report(first, {pid: [chain[0] for chain in samples] for pid, samples in chains.items()})
    assert report["within_1_rounds/pass@1"] == one_retry["retry/pass@1"] == pytest.approx(0.25)  # (0 + 1/2) / 2
    assert report["within_2_rounds/pass@1"] == pytest.approx(0.5)  # a's first sample is solved in round 2
    assert report["within_2_rounds/acc/pass@1"] == pytest.approx(0.75)  # b's second answer: Lean-valid, badly formed
    assert report["within_2_rounds/problems_scored"] == 2.0
    assert not any(name.startswith("within_3_rounds") for name in report)
