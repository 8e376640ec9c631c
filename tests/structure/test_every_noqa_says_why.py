"""A ``# noqa`` silences the linter (``ruff check .``, run by ``make test``) on one line: it says which
rule and why the line is right anyway, so the next reader need not guess. Ruff itself reports a
``# noqa`` that silences nothing (RUF100)."""

import io
import re
import tokenize

from tests.structure.source_tree import ROOT

CHECKED_FOLDERS = ("platform", "trainer", "deploy", "leanrl", "tests", "benchmarks", "scripts")
# The rule's codes after "noqa:", then a dash or a parenthesis and the words that say why.
EXPLAINED = re.compile(r"#\s*noqa:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*\s*(?:-|—|\()\s*\w")


def test_each_noqa_names_its_rule_and_says_why():
    bare = []
    for folder in CHECKED_FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for comment in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
                if comment.type != tokenize.COMMENT:
                    continue  # a docstring may speak of noqa; only comments are read by ruff
                if re.search(r"#\s*noqa\b", comment.string) and not EXPLAINED.search(comment.string):
                    bare.append(f"  {path.relative_to(ROOT)}:{comment.start[0]}: {comment.string}")
    assert not bare, ("a # noqa names its rule and says why, e.g. `# noqa: BLE001 - a Lean outage must not stop "
                      "the run`:\n" + "\n".join(bare))


def test_a_bare_noqa_is_told_from_an_explained_one():
    assert not EXPLAINED.search("# noqa: E402")
    assert not EXPLAINED.search("# noqa")
    assert EXPLAINED.search("# noqa: E402 - found on the path set just above")
    assert EXPLAINED.search("# noqa: F401  (the fixture, shared with the view tests)")
