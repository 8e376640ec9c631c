"""The platform image builds the docs site it serves under /docs/ in a stage of its own, installing only what
MkDocs and the config schema need, each pinned with its hashes from requirements-dev.lock (deploy/lock_subset.py):
no unpinned download, no torch."""

import re
from pathlib import Path

import pytest

from deploy.lock_subset import entries, normalised, subset

REPO = Path(__file__).resolve().parents[2]
LOCK = (REPO / "requirements-dev.lock").read_text()
NAMES = [line.split("#", 1)[0].strip() for line in (REPO / "deploy" / "docs-packages.txt").read_text().splitlines()]
NAMES = [name for name in NAMES if name]
DOCKERFILE = (REPO / "deploy" / "docker" / "platform.Dockerfile").read_text()


def test_the_subset_pins_every_listed_package_with_its_hashes_and_nothing_else():
    text = subset(LOCK, NAMES)
    pinned = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\$", text, re.MULTILINE)
    assert sorted(normalised(name) for name, _ in pinned) == sorted(normalised(name) for name in NAMES)
    for name in NAMES:
        assert "--hash=sha256:" in entries(LOCK)[normalised(name)], name
    assert "mkdocs-material==" in text and "pydantic==" in text
    assert "torch==" not in text


def test_a_package_missing_from_the_lock_is_refused_by_name():
    with pytest.raises(SystemExit, match="not in the lock: no-such-package"):
        subset(LOCK, ["mkdocs", "no-such-package"])


def test_the_image_builds_the_site_strict_in_its_own_stage_and_serves_it_from_site():
    stage = DOCKERFILE.split("AS docs\n", 1)[1].split("\nFROM ", 1)[0]
    assert "python lock_subset.py requirements-dev.lock docs-packages.txt > docs.lock" in stage
    assert "pip install --no-cache-dir --require-hashes --no-deps -r docs.lock" in stage
    assert "mkdocs build --strict --site-dir /site" in stage
    assert "COPY --from=docs /site/ site/" in DOCKERFILE.split("AS docs\n", 1)[1]
