"""import_promptset is all or nothing: whatever a malformed file holds, a failure stores nothing."""

import io
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from promptsets.intake import FileCheck
from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem
from promptsets.versions import ImportRejected, import_promptset
from tests.promptsets.conftest import encode, kimina_rows

pytestmark = pytest.mark.django_db
NAMES = (f"promptset {n}" for n in itertools.count())


def stored_counts():
    return (Promptset.objects.count(), Problem.objects.count(), PromptsetVersion.objects.count(),
            VersionProblem.objects.count())


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cut=st.integers(min_value=1, max_value=5000), corrupt_at=st.integers(min_value=0, max_value=5000),
       file_format=st.sampled_from(["jsonl", "json", "parquet", "csv"]))
def test_a_cut_or_corrupted_file_either_imports_whole_rows_or_stores_nothing(alice, cut, corrupt_at, file_format):
    data = bytearray(encode(kimina_rows(6), file_format))
    data[corrupt_at % len(data)] = 0xFF
    data = bytes(data[: max(1, cut % len(data))])
    before = stored_counts()
    try:
        result = import_promptset(alice, next(NAMES), FileCheck(io.BytesIO(data), filename=f"x.{file_format}"))
    except ImportRejected as rejected:
        assert rejected.report.file_error or rejected.report.rejections or not rejected.report.rows_accepted
        assert stored_counts() == before
    else:
        assert result.report.is_clean
        assert result.version.entries.count() == result.report.rows_accepted


def test_rejected_rows_are_all_listed_even_after_inserting_stopped(alice):
    rows = kimina_rows(3000)
    for index in (5, 2500, 2999):
        rows[index]["formal_statement"] = "theorem oops : 1 = 1 := by simp"
    with pytest.raises(ImportRejected) as caught:
        import_promptset(alice, "big", FileCheck(io.BytesIO(encode(rows, "jsonl")), filename="big.jsonl"))
    assert [r.row for r in caught.value.report.rejections] == [6, 2501, 3000]
    assert stored_counts() == (0, 0, 0, 0)


def test_a_file_with_no_valid_rows_is_rejected_even_when_skipping(alice):
    with pytest.raises(ImportRejected, match="no valid rows"):
        import_promptset(alice, "empty", FileCheck(io.BytesIO(b'{"formal_statement": "nope"}\n'), filename="e.jsonl"),
                         skip_invalid_rows=True)
    assert stored_counts() == (0, 0, 0, 0)
