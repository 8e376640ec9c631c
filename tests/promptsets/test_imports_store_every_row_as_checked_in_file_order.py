"""import_promptset stores each accepted row exactly as the check produced it, listed in the file's order."""

import io
import json

import pytest

from promptsets.intake import FileCheck
from promptsets.models import Problem
from promptsets.versions import import_promptset
from tests.promptsets.conftest import KIMINA_HEADER, encode, kimina_rows

pytestmark = pytest.mark.django_db

# Text that COPY's own format must escape: backslashes, tabs, newlines, COPY's null marker, quotes, non-ASCII.
AWKWARD_INFORMAL = 'Tab\there, a backslash \\ and \\N, "quotes", ℕ → ℝ,\r\nand a last line \\.'


def awkward_rows() -> list[dict]:
    rows = kimina_rows(7)
    rows.reverse()  # ids in descending order: the version must follow the file, not the ids' sort
    rows[1]["natural_language"] = AWKWARD_INFORMAL
    rows[2]["rl_data"] = {"win_rate": None}
    rows[3]["formal_statement"] = "theorem oops : 1 = 1 := by simp"  # rejected, skipped
    rows[4]["source"] = ""
    rows[5]["formal_statement"] = f"{KIMINA_HEADER}/-- a doc comment, kept -/\ntheorem doc_kept : (2 : ℕ) = 2 := by"
    return rows


def stored_fields(problem: Problem) -> dict:
    return {"problem_key": problem.problem_key, "name": problem.name, "formal_statement": problem.formal_statement,
            "informal_statement": problem.informal_statement, "header": problem.header, "source": problem.source,
            "source_win_rate": problem.source_win_rate, "statement_hash": problem.statement_hash}


def test_every_field_of_every_accepted_row_is_stored_as_the_check_produced_it_in_the_files_order(alice):
    data = encode(awkward_rows(), "jsonl")
    check = FileCheck(io.BytesIO(data), filename="awkward.jsonl")
    expected = [{key: value for key, value in vars(candidate).items() if key != "row"} for candidate in check.candidates()]
    assert len(expected) == 6 and len(check.report.rejections) == 1

    result = import_promptset(alice, "awkward", FileCheck(io.BytesIO(data), filename="awkward.jsonl"),
                              skip_invalid_rows=True)

    entries = list(result.version.entries.select_related("problem").order_by("position"))
    assert [entry.position for entry in entries] == list(range(6))
    assert [entry.copies for entry in entries] == [1] * 6
    assert [stored_fields(entry.problem) for entry in entries] == expected
    assert result.version.problem_count == 6
    assert entries[1].problem.informal_statement == AWKWARD_INFORMAL.strip()
    assert entries[2].problem.source_win_rate is None


def test_a_second_import_lists_only_its_own_problems_in_its_own_order(alice, bob):
    first = import_promptset(alice, "first", FileCheck(io.BytesIO(encode(kimina_rows(5), "jsonl")), filename="a.jsonl"))
    rows = kimina_rows(4)
    rows.reverse()
    second = import_promptset(bob, "first", FileCheck(io.BytesIO(encode(rows, "jsonl")), filename="b.jsonl"))

    assert list(second.version.entries.order_by("position").values_list("problem__problem_key", flat=True)) == [
        "kimina-3", "kimina-2", "kimina-1", "kimina-0"]
    assert set(second.version.entries.values_list("problem__promptset_id", flat=True)) == {second.promptset.pk}
    assert first.version.entries.count() == 5


def test_a_row_json_cannot_smuggle_copy_control_text_into_other_columns(alice):
    row = kimina_rows(1)[0] | {"statement_id": "a\tb\\N\nc", "source": "\\.\n"}
    result = import_promptset(alice, "smuggle", FileCheck(io.BytesIO((json.dumps(row) + "\n").encode()),
                                                          filename="s.jsonl"))

    problem = result.version.problems.get()
    assert (problem.problem_key, problem.source) == ("a\tb\\N\nc", "\\.")
