"""Problems and the reader of the platform's JSON-lines export."""

from __future__ import annotations

import json

import pytest

from trainer.recipe.problems import DEFAULT_LEAN_HEADER, Problem, load_problems_jsonl

from tests.recipe.answers import STATEMENT


def write_rows(path, rows):
    path.write_text("\n".join(row if isinstance(row, str) else json.dumps(row, ensure_ascii=False) for row in rows) + "\n", encoding="utf-8")
    return path


def test_it_reads_every_exported_field(tmp_path):
    row = {"problem_id": "mathd_1", "formal_statement": STATEMENT + "\n", "informal_statement": "Show a² + b² ≥ 0.",
           "name": "sum_sq_nonneg", "header": "import Mathlib\nopen Real", "source": "minif2f"}
    [problem] = load_problems_jsonl(write_rows(tmp_path / "set.jsonl", [row, ""]))
    assert problem == Problem("mathd_1", STATEMENT, "Show a² + b² ≥ 0.", "sum_sq_nonneg", "import Mathlib\nopen Real\n", "minif2f")


def test_a_missing_header_means_the_recipe_preamble(tmp_path):
    [problem] = load_problems_jsonl(write_rows(tmp_path / "set.jsonl", [{"problem_id": 7, "formal_statement": STATEMENT}]))
    assert problem.problem_id == "7"
    assert problem.header == DEFAULT_LEAN_HEADER
    assert problem.lean_prefix == DEFAULT_LEAN_HEADER + STATEMENT


def test_the_default_header_is_the_kimina_preamble():
    assert DEFAULT_LEAN_HEADER == "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 400000\n\nopen BigOperators Real Nat Topology Rat\n\n"


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (STATEMENT + " sorry", "must end in ':= by' with no proof after it"),
        (STATEMENT[: -len(" := by")], "must end in ':= by'"),
        ("", "must end in ':= by'"),
    ],
)
def test_a_statement_with_a_proof_or_without_by_is_refused(statement, message):
    with pytest.raises(ValueError, match=message):
        Problem("p", statement)


def test_errors_name_the_file_line_and_fix(tmp_path):
    path = write_rows(tmp_path / "set.jsonl", [{"problem_id": "a", "formal_statement": STATEMENT}, {"problem_id": "b"}])
    with pytest.raises(ValueError, match=r"set\.jsonl, line 2: missing required field\(s\) formal_statement"):
        load_problems_jsonl(path)


def test_broken_json_is_reported_with_its_line(tmp_path):
    path = write_rows(tmp_path / "set.jsonl", ['{"problem_id": "a",'])
    with pytest.raises(ValueError, match=r"line 1: not valid JSON"):
        load_problems_jsonl(path)


def test_a_duplicate_problem_id_is_refused(tmp_path):
    row = {"problem_id": "a", "formal_statement": STATEMENT}
    with pytest.raises(ValueError, match=r"line 2: problem_id 'a' already used on line 1"):
        load_problems_jsonl(write_rows(tmp_path / "set.jsonl", [row, row]))


def test_a_non_string_field_is_refused(tmp_path):
    path = write_rows(tmp_path / "set.jsonl", [{"problem_id": "a", "formal_statement": STATEMENT, "name": ["x"]}])
    with pytest.raises(ValueError, match=r"field 'name' must be a string, got list"):
        load_problems_jsonl(path)


def test_a_problem_round_trips_through_its_dict(problem):
    assert Problem.from_dict(problem.to_dict()) == problem
