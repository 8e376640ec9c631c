"""Curation rules as pure functions from a parent's entries to the new version's entries."""

import pytest
from pydantic import ValidationError

from promptsets.curation import (
    DropAboveWinRate,
    Entry,
    Sample,
    Split,
    WeightHardProblems,
    WinRateSource,
    apply_rule,
    describe_rule,
    parse_rule,
)

ENTRIES = [
    Entry(problem_id=1, copies=1, file_win_rate=0.9, platform_win_rate=0.0),
    Entry(problem_id=2, copies=1, file_win_rate=0.1, platform_win_rate=1.0),
    Entry(problem_id=3, copies=1, file_win_rate=None, platform_win_rate=None),
    Entry(problem_id=4, copies=1, file_win_rate=0.5, platform_win_rate=0.5),
]


def ids(part):
    return [entry.problem_id for entry in part.entries]


def test_dropping_above_a_win_rate_uses_the_chosen_source_and_keeps_unknowns():
    (part,) = apply_rule(ENTRIES, DropAboveWinRate(max_win_rate=0.5))
    assert ids(part) == [2, 3, 4]
    (part,) = apply_rule(ENTRIES, DropAboveWinRate(max_win_rate=0.5, win_rate_source=WinRateSource.PLATFORM))
    assert ids(part) == [1, 3, 4]


def test_dropping_can_also_drop_problems_without_a_win_rate():
    (part,) = apply_rule(ENTRIES, DropAboveWinRate(max_win_rate=0.5, keep_unknown=False))
    assert ids(part) == [2, 4]


def test_weighting_repeats_hard_problems_and_leaves_the_rest_once():
    (part,) = apply_rule(ENTRIES, WeightHardProblems(max_win_rate=0.5, copies=3))
    assert [(e.problem_id, e.copies) for e in part.entries] == [(1, 1), (2, 3), (3, 1), (4, 3)]


def test_sampling_is_reproducible_by_seed_and_keeps_the_parents_order():
    many = [Entry(problem_id=i, copies=1) for i in range(100)]
    (first,) = apply_rule(many, Sample(count=10, seed=7))
    (again,) = apply_rule(many, Sample(count=10, seed=7))
    (other,) = apply_rule(many, Sample(count=10, seed=8))
    assert ids(first) == ids(again) == sorted(ids(first)) and len(ids(first)) == 10
    assert ids(first) != ids(other)


def test_splitting_makes_two_disjoint_parts_covering_the_parent():
    many = [Entry(problem_id=i, copies=1) for i in range(50)]
    train, held_out = apply_rule(many, Split(eval_fraction=0.2, seed=1))
    assert (train.part, held_out.part) == ("train", "eval")
    assert len(ids(held_out)) == 10 and not set(ids(train)) & set(ids(held_out))
    assert sorted(ids(train) + ids(held_out)) == list(range(50))


def test_a_rule_from_json_names_its_bad_field():
    assert parse_rule({"kind": "sample", "count": 3}) == Sample(count=3)
    with pytest.raises(ValidationError, match="max_win_rate"):
        parse_rule({"kind": "drop_above_win_rate", "max_win_rate": 1.5})
    with pytest.raises(ValidationError):
        parse_rule({"kind": "shuffle"})


def test_each_stored_rule_is_described_in_words():
    assert describe_rule({"kind": "sample", "count": 3, "seed": 0}) == "Random sample of 3 (seed 0), in the parent's order"
    assert "skipped" in describe_rule({"kind": "upload", "filename": "a.jsonl", "rows_skipped": 2})
