"""README.md is the front door for people who use the platform: a screen or two (at most 220 lines), its two
commands are the Makefile's, and every link it makes into the repository (the docs among them) exists."""

import re

from tests.docs.conftest import REPO

README = (REPO / "README.md").read_text()


def test_it_stays_under_220_lines():
    assert len(README.splitlines()) <= 220


def test_its_two_commands_are_targets_of_the_makefile():
    makefile = (REPO / "Makefile").read_text()
    for target in ("run", "test"):
        assert f"\nmake {target}\n" in README
        assert re.search(rf"^{target}:", makefile, re.MULTILINE), target


def test_every_link_into_the_repository_names_a_file_that_exists():
    links = [link for link in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README) if "://" not in link]
    assert any(link.startswith("docs/") for link in links)
    missing = [link for link in links if not (REPO / link).exists()]
    assert not missing, missing
