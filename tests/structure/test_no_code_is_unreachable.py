"""No statement follows a ``return``, ``raise``, ``continue`` or ``break`` in the same block: such code
never runs, and whatever it was meant to do silently does not happen (``TrainingRun.__init__`` once set
``evaluation_samples`` after a property's ``return``). Ruff has no such rule, so this test is it."""

import ast

from tests.structure.source_tree import ROOT

CHECKED_FOLDERS = ("platform", "trainer", "deploy", "leanrl", "tests", "benchmarks", "scripts")
ENDS_A_BLOCK = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def unreachable_statements(tree: ast.AST) -> list[tuple[int, str, int]]:
    """(line of the dead statement, what ends its block, that statement's line) for each block."""
    found = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for statement, following in zip(block, block[1:]):
                if isinstance(statement, ENDS_A_BLOCK):
                    found.append((following.lineno, type(statement).__name__.lower(), statement.lineno))
                    break
    return found


def test_no_statement_follows_a_return_raise_continue_or_break():
    dead = []
    for folder in CHECKED_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for line, ending, ending_line in unreachable_statements(ast.parse(path.read_text())):
                dead.append(f"  {path.relative_to(ROOT)}:{line} never runs: it follows the {ending} "
                            f"of line {ending_line}")
    assert not dead, "unreachable code (move it before the return, or delete it):\n" + "\n".join(dead)


def test_the_check_finds_code_after_a_return():
    tree = ast.parse("def attempt(self):\n    return 1\n    self.samples = []\n")
    assert unreachable_statements(tree) == [(3, "return", 2)]
