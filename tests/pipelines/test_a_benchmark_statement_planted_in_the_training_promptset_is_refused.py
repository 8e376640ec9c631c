"""The contamination guard: a proof of a statement the held-out benchmark holds never enters the proof corpus, even
when the training promptset carries it under another theorem name; the refusal is counted and named."""

import json
from pathlib import Path

import pytest

from pipelines import actions
from pipelines.advance import advance
from pipelines.models import Stage
from tests.pipelines.conftest import SMOKE_STATEMENTS, add_attempt, end_run, make_version

pytestmark = pytest.mark.django_db

BENCHMARK_STATEMENT = "theorem bench_square : (5 : ℕ) * 5 = 25 := by"
PLANTED = "theorem planted_square :  (5 : ℕ) *  5 = 25 := by"  # the benchmark's statement, renamed and re-spaced


def test_a_proof_of_a_planted_benchmark_statement_is_refused_from_the_corpus(alice, dispatched, settings, tmp_path):
    settings.ARTIFACTS_DIR = tmp_path
    training = make_version(alice, "planted training", [*SMOKE_STATEMENTS[:1], ("planted_square", PLANTED)])
    benchmark = make_version(alice, "bench", [("bench_square", BENCHMARK_STATEMENT)])
    pipeline = actions.launch_pipeline(owner=alice, request={
        "name": "guarded", "preset": "cpu-smoke", "training_version_id": training.pk,
        "benchmark_version_id": benchmark.pk, "max_iterations": 1})
    advance(pipeline.pk)
    harvest = pipeline.current_iteration.harvest_run
    add_attempt(harvest, "smoke_nat_add", accepted=True)
    add_attempt(harvest, "planted_square", accepted=True)
    end_run(harvest)

    advance(pipeline.pk)

    iteration = pipeline.current_iteration
    assert iteration.stage == Stage.SFT
    corpus = iteration.corpus
    assert (corpus.proof_count, corpus.refused_count, corpus.refused_keys) == (1, 1, ["planted_square"])
    rows = [json.loads(line) for line in Path(corpus.path).read_text().splitlines()]
    assert [row["problem_id"] for row in rows] == ["smoke_nat_add"]
    assert all("(5 : ℕ) *" not in row["formal_statement"] + row["response"] for row in rows)
    assert iteration.proofs_harvested == 2
