"""Property-based: malformed files get a clear error, row by row or for the file, and never crash."""

import io
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptsets.intake import FileCheck, RowLimits
from promptsets.validation import StatementRejected, scan, validate_lean_statement
from tests.promptsets.conftest import encode, kimina_rows

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FORMATS = st.sampled_from(["jsonl", "json", "parquet", "csv"])
SMALL_LIMITS = RowLimits(max_row_bytes=4096, max_statement_chars=2000, max_field_chars=2000)

json_junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)

LEAN_PIECES = [
    "theorem t : 1 + 1 = 2", " := by", " := by sorry", ":= sorry", "/-", "-/", "/--", "--", "\n", '"', "'a'",
    "#eval 1", "run_cmd pure ()", "import Mathlib", "open Real", "open Real in", "set_option maxHeartbeats 0",
    "set_option debug.skipKernelTC true", "@[simp]", "lemma", "example : True", "(", ")", "⟨", "sorry", "def x := 1",
    "«weird name»", "theorem", " ", "ℕ", "\x00", "\udcff",
]


def check(data: bytes, filename: str, **options):
    checker = FileCheck(io.BytesIO(data), filename=filename, limits=SMALL_LIMITS, **options)
    problems = list(checker.candidates())
    report = checker.report
    if report.file_error is None:
        assert report.rows_read == report.rows_accepted + report.rows_rejected
    assert report.rows_accepted == len(problems)
    for rejection in report.rejections:
        assert rejection.reason and rejection.row >= 1
    return problems, report


@FAST
@given(data=st.binary(max_size=3000), file_format=FORMATS)
def test_random_bytes_get_a_report_not_a_crash(data, file_format):
    check(data, f"random.{file_format}")


@FAST
@given(text=st.text(min_size=1, max_size=200), encoding=st.sampled_from(["utf-16", "utf-16-le", "latin-1", "cp1252"]),
       file_format=st.sampled_from(["jsonl", "json", "csv"]))
def test_files_in_other_encodings_are_refused_or_rejected_row_by_row(text, encoding, file_format):
    rows = [{"formal_statement": f"theorem t : {json.dumps(text)} = {json.dumps(text)} := by", "name": "é"}]
    try:
        data = encode(rows, file_format).decode().encode(encoding)
    except UnicodeEncodeError:
        return
    problems, report = check(data, f"other.{file_format}")
    if encoding.startswith("utf-16"):
        assert report.file_error and "UTF-16" in report.file_error
    elif problems:  # latin-1 only decodes as UTF-8 when it is plain ASCII
        assert data.isascii()


@FAST
@given(cut=st.integers(min_value=0, max_value=10_000))
def test_a_parquet_file_cut_anywhere_is_refused_with_a_file_error(cut):
    data = encode(kimina_rows(6), "parquet")
    _, report = check(data[: cut % len(data)], "cut.parquet")
    assert report.file_error


@FAST
@given(cut=st.integers(min_value=1, max_value=10_000), file_format=st.sampled_from(["json", "jsonl", "csv"]))
def test_a_text_file_cut_anywhere_keeps_the_rows_before_the_cut(cut, file_format):
    data = encode(kimina_rows(6), file_format)
    problems, report = check(data[: cut % len(data) or 1], f"cut.{file_format}")
    assert report.file_error or report.rows_read >= len(problems)
    assert all(p.formal_statement.endswith(":= by") for p in problems)


@FAST
@given(rows=st.lists(st.dictionaries(st.text(max_size=12), json_junk, max_size=5), min_size=1, max_size=5),
       file_format=st.sampled_from(["json", "jsonl"]))
def test_rows_of_nested_junk_and_missing_columns_are_rejected_with_reasons(rows, file_format):
    problems, report = check(json.dumps(rows).encode() if file_format == "json" else
                             b"\n".join(json.dumps(r).encode() for r in rows), f"junk.{file_format}")
    assert problems == [] or all(isinstance(p.formal_statement, str) for p in problems)
    assert report.file_error or report.rejections


@FAST
@given(values=st.lists(json_junk, min_size=1, max_size=5))
def test_a_json_array_of_non_objects_rejects_each_element(values):
    _, report = check(json.dumps(values).encode(), "values.json")
    assert report.file_error or report.rows_rejected == len(values)


@FAST
@given(size=st.integers(min_value=4097, max_value=200_000), file_format=FORMATS)
def test_huge_fields_are_rejected_row_by_row_or_as_a_file_error(size, file_format):
    rows = kimina_rows(3)
    rows[1]["natural_language"] = "x" * size
    problems, report = check(encode(rows, file_format), f"huge.{file_format}")
    assert report.file_error or ([p.problem_key for p in problems] == ["kimina-0", "kimina-2"]
                                 and "limit" in report.rejections[0].reason)


@settings(max_examples=300, deadline=None)
@given(pieces=st.lists(st.sampled_from(LEAN_PIECES), min_size=1, max_size=12))
def test_lean_comment_tricks_are_accepted_only_as_a_clean_statement(pieces):
    text = "".join(pieces)
    try:
        statement = validate_lean_statement(text)
    except StatementRejected as error:
        assert str(error)
        return
    assert statement.formal_statement.endswith(":= by")
    again = validate_lean_statement(statement.formal_statement, header=statement.header)
    assert again == statement  # what is stored passes the same check unchanged
    code = [token.text for token in scan(statement.header + "\n" + statement.formal_statement)
            if token.kind not in ("comment", "doc_comment", "string")]
    # A definition before the theorem is accepted (it is part of the statement); nothing that runs code is.
    assert not set(code) & {"#eval", "run_cmd", "debug.skipKernelTC", "@[", "sorry"}
