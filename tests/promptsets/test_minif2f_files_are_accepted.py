"""The miniF2F files in ../shared/data, in both layouts, are accepted whole (skipped where absent)."""

from promptsets.intake import FileCheck

MINIF2F_HEADER = "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\nopen BigOperators Real Nat Topology Rat"


def read(path):
    with open(path, "rb") as file:
        check = FileCheck(file, filename=path.name)
        return list(check.candidates()), check.report


def test_the_goedel_layout_with_the_header_inside_the_statement_is_accepted_whole(minif2f_goedel_path):
    problems, report = read(minif2f_goedel_path)
    assert report.is_clean, [r.describe() for r in report.rejections[:5]]
    assert report.rows_accepted == 244
    assert {p.header for p in problems} == {MINIF2F_HEADER}
    assert all(p.formal_statement.endswith(":= by") for p in problems)
    first = problems[0]
    assert first.problem_key == first.name == "mathd_algebra_478"
    assert first.formal_statement.startswith("/-- The volume of a cone")  # its doc comment stays with it
    assert first.informal_statement.startswith("The volume of a cone") and not first.informal_statement.endswith("-/")


def test_the_deepseek_layout_with_a_separate_header_column_is_accepted_whole(minif2f_deepseek_path):
    problems, report = read(minif2f_deepseek_path)
    assert report.is_clean, [r.describe() for r in report.rejections[:5]]
    assert report.rows_accepted == 488
    assert report.columns["header"] == "header"
    assert {p.header for p in problems} == {MINIF2F_HEADER}
    assert all(p.formal_statement.startswith("theorem ") for p in problems)


def test_both_layouts_state_the_same_test_problems(minif2f_goedel_path, minif2f_deepseek_path):
    goedel = {p.problem_key for p in read(minif2f_goedel_path)[0]}
    deepseek = {p.problem_key for p in read(minif2f_deepseek_path)[0]}
    assert goedel <= deepseek
