import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MKDOCS = [sys.executable, "-m", "mkdocs"]


def build(config: Path, site: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict`, as `make test` runs it, into ``site``."""
    return subprocess.run([*MKDOCS, "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
                          cwd=config.parent, capture_output=True, text=True, timeout=300,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin", "HOME": str(config.parent)})


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """The docs site built from this checkout, strict, into a folder of this session (never the checkout's site/)."""
    site = tmp_path_factory.mktemp("site")
    result = build(REPO / "mkdocs.yml", site)
    assert result.returncode == 0, result.stdout + result.stderr
    return site


@pytest.fixture
def docs_copy(tmp_path) -> Path:
    """A copy of mkdocs.yml and docs/ to break on purpose; returns the copy's mkdocs.yml."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    return tmp_path / "mkdocs.yml"
