"""JSON Lines, JSON arrays, Parquet and CSV: the same rows give the same problems, streamed."""

import io
import json

import pytest

from promptsets.intake import ColumnMapping, FileCheck, RowLimits, check_file
from promptsets.parsing import FileFormat, FileFormatError, detect_format
from tests.promptsets.conftest import KIMINA_HEADER, encode, kimina_rows

FORMATS = ["jsonl", "json", "parquet", "csv"]


def candidates(data: bytes, filename: str, **options):
    check = FileCheck(io.BytesIO(data), filename=filename, **options)
    return list(check.candidates()), check.report


@pytest.mark.parametrize("file_format", FORMATS)
def test_it_reads_the_kimina_layout_from_every_format(file_format):
    problems, report = candidates(encode(kimina_rows(5), file_format), f"kimina.{file_format}")
    assert report.is_clean, report.as_dict()
    assert report.file_format == file_format
    assert [p.problem_key for p in problems] == [f"kimina-{i}" for i in range(5)]
    assert problems[2].formal_statement == "theorem sum_2 (n : ℕ) (h : n = 2) : n + 1 = 3 := by"
    assert problems[2].header == KIMINA_HEADER.strip()
    assert problems[2].informal_statement == "Show that if n = 2 then n + 1 = 3."
    assert problems[2].source == "synthetic"
    assert problems[2].source_win_rate == pytest.approx(0.5)


def test_it_recognises_the_numinamath_lean_columns():
    rows = [{"uuid": "a1b2", "problem": "Prove 1 + 1 = 2.", "formal_statement": "theorem one_add_one : 1 + 1 = 2 := by",
             "source": "olympiads"}]
    (problem,), report = candidates(encode(rows, "jsonl"), "numina.jsonl")
    assert report.columns == {"formal_statement": "formal_statement", "informal_statement": "problem",
                              "problem_key": "uuid", "source": "source"}
    assert (problem.problem_key, problem.name, problem.informal_statement) == ("a1b2", "one_add_one", "Prove 1 + 1 = 2.")


def test_it_gives_the_recipe_header_to_rows_without_imports():
    rows = [{"formal_statement": "theorem t : 1 + 1 = 2 := by"}]
    (problem,), _ = candidates(encode(rows, "jsonl"), "bare.jsonl")
    assert problem.header.startswith("import Mathlib\nimport Aesop")
    (problem,), _ = candidates(encode(rows, "jsonl"), "bare.jsonl", default_header="")
    assert problem.header == ""


def test_it_reads_columns_the_person_mapped():
    rows = [{"lean": "theorem t : 1 + 1 = 2 := by", "ident": "x-1", "question": "What is 1 + 1?", "difficulty": {"solve": 0.25}}]
    mapping = ColumnMapping(formal_statement="lean", problem_key="ident", informal_statement="question",
                            win_rate="difficulty.solve")
    (problem,), report = candidates(encode(rows, "json"), "custom.json", mapping=mapping)
    assert (problem.problem_key, problem.informal_statement, problem.source_win_rate) == ("x-1", "What is 1 + 1?", 0.25)


def test_it_names_the_columns_it_found_when_the_statement_column_is_missing():
    _, report = candidates(encode([{"lean": "theorem t : True := by"}], "csv"), "custom.csv")
    assert "no formal statement column" in report.file_error
    assert "lean" in report.file_error


def test_it_refuses_a_mapped_column_that_is_not_in_the_file():
    _, report = candidates(encode(kimina_rows(1), "parquet"), "k.parquet", mapping=ColumnMapping(problem_key="nope"))
    assert "'nope'" in report.file_error and "statement_id" in report.file_error


def test_it_lists_each_rejected_row_with_its_number_and_reason():
    rows = kimina_rows(4)
    rows[1]["formal_statement"] = "theorem broken : 1 = 1 := by simp"
    rows[3]["formal_statement"] = "#eval 1\ntheorem evil : True := by"
    problems, report = candidates(encode(rows, "jsonl"), "mixed.jsonl")
    assert len(problems) == 2
    assert [(r.row, r.problem_key) for r in report.rejections] == [(2, "kimina-1"), (4, "kimina-3")]
    assert "a proof follows" in report.rejections[0].reason
    assert "runs code" in report.rejections[1].reason
    assert report.summary() == "4 rows read, 2 valid, 2 rejected (format jsonl)"


def test_it_detects_duplicate_statements_ignoring_whitespace():
    rows = kimina_rows(2)
    rows.append(dict(rows[0], statement_id="again", formal_statement=rows[0]["formal_statement"].replace(" : ", "  :  ")))
    _, report = candidates(encode(rows, "jsonl"), "dups.jsonl")
    assert [(r.row, r.reason.split(" (")[0]) for r in report.rejections] == [(3, "duplicate of row 1")]


def test_it_detects_duplicate_ids():
    rows = [{"name": "same", "formal_statement": "theorem a : 1 = 1 := by"},
            {"name": "same", "formal_statement": "theorem b : 2 = 2 := by"}]
    _, report = candidates(encode(rows, "jsonl"), "ids.jsonl")
    assert "already used by row 1" in report.rejections[0].reason


def test_it_keeps_rows_whose_theorem_names_repeat_when_the_file_has_no_id_column():
    rows = [{"formal_statement": "theorem test : 1 = 1 := by"}, {"formal_statement": "theorem test : 2 = 2 := by"}]
    problems, report = candidates(encode(rows, "jsonl"), "autoformalized.jsonl")
    assert report.is_clean
    assert [p.problem_key for p in problems] == ["test", "test~row-2"]


def test_it_rejects_win_rates_outside_zero_to_one():
    rows = kimina_rows(2)
    rows[0]["rl_data"] = {"win_rate": 1.5}
    rows[1]["rl_data"] = {"win_rate": "often"}
    _, report = candidates(encode(rows, "jsonl"), "rates.jsonl")
    assert all("from 0 to 1" in r.reason for r in report.rejections) and len(report.rejections) == 2


def test_a_bad_line_in_json_lines_rejects_only_that_row():
    data = encode(kimina_rows(3), "jsonl").split(b"\n")
    data[1] = b'{"statement_id": "cut'
    problems, report = candidates(b"\n".join(data), "cut.jsonl")
    assert len(problems) == 2 and report.rejections[0].row == 2 and "not valid JSON" in report.rejections[0].reason


def test_invalid_utf8_rejects_only_that_row():
    lines = encode(kimina_rows(3), "jsonl").split(b"\n")
    lines[2] = lines[2].replace("ℕ".encode(), b"\xff\xfe")
    problems, report = candidates(b"\n".join(lines), "latin.jsonl")
    assert len(problems) == 2 and "not valid UTF-8" in report.rejections[0].reason and report.rejections[0].row == 3


def test_invalid_utf8_in_csv_rejects_only_that_row():
    data = encode(kimina_rows(3), "csv").replace("(n : ℕ) (h : n = 1)".encode(), b"(n : \xa0) (h : n = 1)")
    problems, report = candidates(data, "latin.csv")
    assert len(problems) == 2 and "not valid UTF-8" in report.rejections[0].reason


def test_a_row_over_the_size_limit_is_rejected_without_reading_it_whole():
    rows = kimina_rows(2)
    rows.insert(1, {"statement_id": "huge", "formal_statement": "theorem t : True := by", "junk": "x" * 50_000})
    problems, report = candidates(encode(rows, "jsonl"), "huge.jsonl", limits=RowLimits(max_row_bytes=10_000))
    assert len(problems) == 2
    assert "the limit is 10,000 bytes per row" in report.rejections[0].reason


def test_a_utf16_file_is_refused_with_the_fix():
    _, report = candidates(encode(kimina_rows(2), "csv").decode().encode("utf-16"), "excel.csv")
    assert "UTF-16" in report.file_error and "UTF-8" in report.file_error


def test_a_truncated_parquet_file_is_refused():
    data = encode(kimina_rows(5), "parquet")
    _, report = candidates(data[: len(data) - 40], "cut.parquet")
    assert "Parquet" in report.file_error


def test_a_truncated_json_array_is_refused():
    data = encode(kimina_rows(5), "json")
    _, report = candidates(data[:-3], "cut.json")
    assert report.file_error and "element" in report.file_error


def test_a_json_file_that_is_not_an_array_is_refused():
    _, report = candidates(b'{"formal_statement": "theorem t : True := by"}', "object.json")
    assert "one JSON array" in report.file_error


def test_the_format_comes_from_the_name_or_the_first_bytes():
    assert detect_format("a.JSONL", b"") is FileFormat.JSONL
    assert detect_format("upload", b"PAR1") is FileFormat.PARQUET
    assert detect_format("upload", b"  [{") is FileFormat.JSON
    with pytest.raises(FileFormatError, match="decompress"):
        detect_format("a.jsonl.gz", b"\x1f\x8b")


def test_a_json_array_is_read_in_chunks_across_element_boundaries():
    rows = [{"statement_id": f"k{i}", "formal_statement": f"theorem t{i} : {i} = {i} := by", "pad": "y" * 5000}
            for i in range(60)]
    problems, report = candidates(json.dumps(rows).encode(), "many.json")
    assert report.is_clean and len(problems) == 60


def test_check_file_reports_without_yielding():
    report = check_file(io.BytesIO(encode(kimina_rows(3), "csv")), filename="k.csv")
    assert (report.rows_read, report.rows_accepted, report.is_clean) == (3, 3, True)
