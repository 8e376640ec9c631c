"""PutnamBench (672 rows, the benchmark's own lean4/src) and ProofNet (357 rows, DeepSeek-Prover-V1.5's Lean 4
copy) in ../shared/data are valid Lean 4 as they stand: validate_promptset accepts every row, and each row's
statement and header are what its author wrote, once (skipped where the data is absent)."""

import json

from django.core.management import call_command

from promptsets.intake import FileCheck


def read(path):
    with open(path, "rb") as file:
        check = FileCheck(file, filename=path.name)
        return {problem.problem_key: problem for problem in check.candidates()}, check.report


def test_validate_promptset_accepts_every_putnambench_row(putnambench_path, capsys):
    call_command("validate_promptset", str(putnambench_path))
    assert "672 rows read, 672 valid, 0 rejected" in capsys.readouterr().out


def test_validate_promptset_accepts_every_proofnet_row(proofnet_path, capsys):
    call_command("validate_promptset", str(proofnet_path))
    assert "357 rows read, 357 valid, 0 rejected" in capsys.readouterr().out


def test_a_proofnet_row_keeps_the_header_its_statement_carries_and_is_not_given_the_header_column_twice(proofnet_path):
    problems, report = read(proofnet_path)
    assert report.columns["header"] == "header"
    rows = [json.loads(line) for line in proofnet_path.read_text(encoding="utf-8").splitlines()]
    for row in rows:
        problem = problems[row["name"]]
        # The row's statement is its header and then ours: nothing added in front, nothing twice.
        assert row["formal_statement"].startswith(problem.header) and problem.header.count("import Mathlib") == 1
        assert row["formal_statement"].rstrip().endswith(problem.formal_statement)


def test_putnambench_problems_stated_about_definitions_keep_them_in_the_statement(putnambench_path):
    problems, _ = read(putnambench_path)
    tetration = problems["putnam_1997_b5"]
    assert tetration.header == "import Mathlib"
    assert tetration.formal_statement.startswith("def tetration : ℕ → ℕ → ℕ\n  | _, 0 => 1\n")
    assert "theorem putnam_1997_b5" in tetration.formal_statement
    assert problems["putnam_1997_b1"].formal_statement.startswith("noncomputable def dist_to_int : ℝ → ℝ :=")
    assert "\ninductive HasWinningStrategy (n : ℕ)" in problems["putnam_2025_a3"].formal_statement
    with_definitions = [key for key, problem in problems.items() if problem.formal_statement.split()[0] != "/--"
                        and not problem.formal_statement.startswith("theorem")]
    assert len(with_definitions) == 9, with_definitions
