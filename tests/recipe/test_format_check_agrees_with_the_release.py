"""The default format check gives the release's own checker's verdict and category on every
answer of ../shared/data/format_oracle.jsonl (skipped where the data is absent)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from trainer.config import RewardConfig
from trainer.recipe.format_reward import check_format
from trainer.recipe.problems import Problem

ORACLE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "format_oracle.jsonl"


@pytest.fixture(scope="module")
def oracle_rows() -> list[dict]:
    if not ORACLE.exists():
        pytest.skip(f"{ORACLE} is absent (the repository carries no data)")
    return [json.loads(line) for line in ORACLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def release_verdict(row: dict, config: RewardConfig) -> str | None:
    # The statement exactly as the release's checker received it, preamble and all.
    problem = Problem(problem_id=row["id"], formal_statement=row["formal_statement"], header="")
    earlier = [message["content"] for message in row["history"] or () if message["role"] == "assistant"]
    check = check_format(row["response"], problem, config, earlier_answers=earlier)
    return check.error.name if check.error is not None else None


def test_every_oracle_answer_gets_the_releases_verdict_and_category(oracle_rows):
    config = RewardConfig()
    disagreements = []
    for row in oracle_rows:
        ours = release_verdict(row, config)
        if ours != row["recipe_format_error"]:
            disagreements.append(f"{row['id']} ({row['kind']}): release {row['recipe_format_error']}, ours {ours}")
    assert len(oracle_rows) >= 3416
    assert not disagreements, f"{len(disagreements)} of {len(oracle_rows)} disagree:\n" + "\n".join(disagreements[:25])


def test_the_oracle_exercises_every_release_category_and_second_turns(oracle_rows):
    # So the agreement above is not an agreement on easy cases only.
    categories = Counter(row["recipe_format_error"] for row in oracle_rows)
    assert len(categories) >= 9 and categories[None] > 0
    assert sum(1 for row in oracle_rows if row["history"]) > 0
