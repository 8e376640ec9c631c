"""PutnamBench and ProofNet (valid and test) ship as miniF2F does: committed with their licence texts, imported
as public read-only benchmarks whose every row the trainer reads, and listed with the figures their sources
published, each with its conditions (benchmark version, Lean and Mathlib, budget, verifier) and labelled as
reported; an evaluation of ours on the leaderboard says its own conditions and that it was measured here."""

import json

import pytest

from promptsets import benchmarks
from promptsets.export import export_rows
from promptsets.models import Benchmark
from runs.models import Evaluation, Run
from tests.evaluations.leaderboard_cast import evaluation_values
from trainer.config import RunConfig
from trainer.recipe.problems import Problem

pytestmark = pytest.mark.django_db

# The issue's counts; the README says whether the files match them.
EXPECTED_ROWS = {"putnambench.lean4.jsonl": 672, "proofnet_test.lean4.jsonl": 179, "proofnet_valid.lean4.jsonl": 178}


def rows_of(filename: str) -> list[dict]:
    text = (benchmarks.DATA_FOLDER / filename).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def shipped():
    benchmarks.create_shipped_benchmarks()


def test_the_files_hold_the_issues_counts_672_and_357_and_ship_with_their_licence_texts():
    for filename, count in EXPECTED_ROWS.items():
        assert len(rows_of(filename)) == count, filename
    assert {row["split"] for row in rows_of("proofnet_test.lean4.jsonl")} == {"test"}
    assert {row["split"] for row in rows_of("proofnet_valid.lean4.jsonl")} == {"valid"}
    assert {row["lean_version"] for row in rows_of("putnambench.lean4.jsonl")} == {"leanprover/lean4:v4.27.0"}
    assert "Apache License" in (benchmarks.DATA_FOLDER / "putnambench.LICENSE.txt").read_text()
    assert "MIT License" in (benchmarks.DATA_FOLDER / "proofnet.LICENSE.txt").read_text()
    readme = (benchmarks.DATA_FOLDER / "README.md").read_text()
    assert "putnambench.LICENSE.txt" in readme and "proofnet.LICENSE.txt" in readme and "672" in readme


def test_every_row_is_imported_and_read_back_in_the_trainers_problem_format(shipped, alice):
    for key, filename in ((benchmarks.PUTNAMBENCH, "putnambench.lean4.jsonl"),
                          (benchmarks.PROOFNET_TEST, "proofnet_test.lean4.jsonl"),
                          (benchmarks.PROOFNET_VALID, "proofnet_valid.lean4.jsonl")):
        version = Benchmark.objects.get(reference_key=key, is_shipped=True).version
        problems = [Problem.from_dict(row) for row in export_rows(version, viewer=alice)]
        names = [row["name"] for row in rows_of(filename)]
        assert [problem.problem_id for problem in problems] == names, f"{filename}: a row was dropped or renamed"
        assert all(problem.lean_prefix.startswith("import Mathlib") for problem in problems)
        assert not any("import Mathlib" in problem.formal_statement for problem in problems), "the header twice"
        assert all(problem.formal_statement.endswith(":= by") for problem in problems)


def test_the_api_lists_putnambenchs_published_counts_with_their_budgets_as_reported(client, alice, shipped):
    client.force_login(alice)
    listed = {row["name"]: row for row in client.get("/api/benchmarks/").json()}
    putnam = listed["PutnamBench"]
    assert putnam["problems"] == 672 and putnam["is_shipped"]
    solved = {row["model"]: (row["problems_solved"], row["k"]) for row in putnam["references"]}
    assert solved == {"DeepSeek-Prover-V2-671B": (47, 1024), "Goedel-Prover-V2-32B": (86, 184),
                      "Kimina-Prover-7B-Distill": (10, 192)}
    for row in putnam["references"]:
        assert row["pass_at_k"] is None, "a count of a 644–660-problem benchmark is not a share of today's 672"
        assert "644–660" in row["benchmark_version"] and row["label"] == "published, not measured here"
    goedel = next(row for row in putnam["references"] if row["model"] == "Goedel-Prover-V2-32B")
    assert goedel["lean_version"] == "Lean 4.9"
    assert listed["ProofNet-test"]["problems"] == 179 and listed["ProofNet-valid"]["problems"] == 178
    proofnet = {row["model"]: (row["pass_at_k"], row["k"]) for row in listed["ProofNet-test"]["references"]}
    assert proofnet == {"BFS-Prover-V2-32B": (0.414, None), "OProver-32B": (0.332, 32)}


def test_a_leaderboard_row_says_its_benchmark_lean_budget_verifier_and_whether_it_was_measured_here(
        alices_client, alice, shipped):
    benchmark = Benchmark.objects.get(reference_key=benchmarks.PUTNAMBENCH)
    config = RunConfig.from_preset("cpu-smoke").to_json_dict()
    run = Run.objects.create(owner=alice, name="putnam eval", kind="eval", promptset_version=benchmark.version,
                             preset="cpu-smoke", config=config, state="succeeded")
    first = benchmark.version.entries.select_related("problem").order_by("position").first().problem
    Evaluation.objects.create(run=run, step=0, values=evaluation_values({first.problem_key: [0.0, 1.0]}, standin=False))

    page = alices_client.get(f"/benchmarks/{benchmark.pk}/")
    [row] = page.context["real_rows"]
    ours = dict(row.conditions.items())
    assert ours["figure"] == "measured here"
    assert ours["benchmark"] == str(benchmark.version)
    assert ours["Lean and Mathlib"] == "not recorded by the run"
    assert ours["budget"] == (f"pass@2, first attempt and up to {config['retry']['max_rounds']} round(s) of error "
                              f"correction, answers up to {config['rollout']['max_response_tokens']:,} tokens")
    assert ours["verifier"] == "Lean with the statement and axiom guard"
    html = page.content.decode()
    assert "86 problems solved" in html and "Lean: Lean 4.9; Mathlib: not stated by the source" in html
    assert html.count('<td class="conditions">') == 1 + 3  # our row and the three published ones
