"""The Statement column of a version's problems shows what is to be proved, from ``theorem`` on: not the docstring
or comment many uploaded statements open with. The one Lean lexer says what is a comment."""

import re

import pytest

from promptsets.lean_view import without_leading_comments
from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem, statement_hash

pytestmark = pytest.mark.django_db

DOCUMENTED = ("/-- The sum of two and three, a /- nested -/ note. -/\n"
              "-- from the competition's 1999 paper\n"
              "theorem documented : (2 : ℕ) + 3 = 5 := by")


def test_leading_doc_comments_line_comments_and_nested_blocks_are_skipped():
    assert without_leading_comments(DOCUMENTED) == "theorem documented : (2 : ℕ) + 3 = 5 := by"


def test_a_comment_inside_the_theorem_and_a_statement_without_one_are_kept_whole():
    inside = "theorem t /- why -/ : 1 = 1 := by"
    assert without_leading_comments(inside) == inside
    assert without_leading_comments("  -- only a comment") == "  -- only a comment"


def test_the_version_pages_statement_column_starts_at_the_theorem(alices_client, alice):
    promptset = Promptset.objects.create(owner=alice, name="documented")
    version = PromptsetVersion.objects.create(promptset=promptset, number=1, problem_count=1)
    problem = Problem.objects.create(promptset=promptset, problem_key="documented", formal_statement=DOCUMENTED,
                                     statement_hash=statement_hash(DOCUMENTED))
    VersionProblem.objects.create(version=version, problem=problem, position=0)
    html = alices_client.get(version.get_absolute_url()).content.decode()
    cell = re.search(r'<code class="statement-preview">(.*?)</code>', html, re.S)[1]
    assert cell.startswith("theorem documented : (2 : ℕ) + 3 = 5")
    assert "sum of two" not in cell
