"""`make test` builds the docs with `mkdocs build --strict`: a link to a page that does not exist, an anchor
that does not exist, or a page left out of the navigation fails the build, naming what is wrong."""

import shlex
import subprocess
import sys

from tests.docs.conftest import REPO, build


def test_the_docs_as_they_are_build_strict(built_site):
    assert (built_site / "index.html").is_file()
    assert (built_site / "guide" / "launching.html").is_file()


def test_a_link_to_a_missing_page_fails_the_build_and_names_it(docs_copy, tmp_path):
    page = docs_copy.parent / "docs" / "guide" / "launching.md"
    page.write_text(page.read_text() + "\nSee [the lost chapter](no-such-page.md).\n")
    result = build(docs_copy, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-page.md" in result.stdout + result.stderr


def test_a_link_to_a_missing_anchor_fails_the_build(docs_copy, tmp_path):
    page = docs_copy.parent / "docs" / "recipe.md"
    page.write_text(page.read_text() + "\nSee [the contract](guide/launching.md#no-such-section).\n")
    result = build(docs_copy, tmp_path / "site")
    assert result.returncode != 0
    assert "no-such-section" in result.stdout + result.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(docs_copy, tmp_path):
    (docs_copy.parent / "docs" / "orphan.md").write_text("# Nobody links here\n")
    result = build(docs_copy, tmp_path / "site")
    assert result.returncode != 0
    assert "orphan.md" in result.stdout + result.stderr


def test_make_tests_own_docs_command_fails_on_a_broken_link(docs_copy, tmp_path):
    recipe = (REPO / "Makefile").read_text().split("\ntest:\n", 1)[1].split("\n\n", 1)[0]
    line = next(line.strip() for line in recipe.splitlines() if line.strip().startswith(".venv/bin/mkdocs"))
    argv = [sys.executable, "-m", "mkdocs", *shlex.split(line)[1:]]
    page = docs_copy.parent / "docs" / "guide" / "launching.md"
    page.write_text(page.read_text() + "\nSee [the lost chapter](no-such-page.md).\n")
    result = subprocess.run(argv, cwd=docs_copy.parent, capture_output=True, text=True, timeout=300,
                            env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert result.returncode != 0, f"`{line}` passed with a broken link"
