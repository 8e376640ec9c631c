"""``pip install ./leanrl`` installs the client alone (leanrl/pyproject.toml): its wheel holds only ``leanrl/``,
requires only httpx (the API) and tqdm (its progress bars), and runs in a fresh virtual environment that has
nothing else, the trainer, Django and the platform's apps out of reach.

Offline, as the suite runs: the wheel is built from a copy of the folder with the setuptools already installed
(no build isolation, no index), and its two dependencies are copied, with theirs, from the files pip installed
here (each distribution's RECORD), which is what pip would put beside it on a laptop."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from email.parser import Parser
from importlib.metadata import distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.structure.source_tree import ROOT

HTTP_DEPENDENCIES = {"httpx", "tqdm"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # A copy, so that setuptools' build/ and egg-info land in a temporary folder, not in the checkout.
    work = tmp_path_factory.mktemp("leanrl-wheel")
    shutil.copytree(ROOT / "leanrl", work / "leanrl",
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
                    "--wheel-dir", str(work / "dist"), str(work / "leanrl")],
                   check=True, capture_output=True, text=True, timeout=300)
    (built,) = (work / "dist").glob("leanrl-*.whl")
    return built


def metadata(wheel: Path) -> tuple[list[str], dict]:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        (metadata_file,) = [name for name in names if name.endswith(".dist-info/METADATA")]
        return names, Parser().parsestr(archive.read(metadata_file).decode())


def dependency_closure(names: set[str]) -> set[str]:
    """The installed distributions ``names`` need, themselves included (markers read for this Python)."""
    closure, pending = set(), list(names)
    while pending:
        name = re.sub(r"[-_.]+", "-", pending.pop()).lower()
        if name in closure:
            continue
        closure.add(name)
        for line in distribution(name).requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pending.append(requirement.name)
    return closure


def test_the_wheel_holds_only_the_client_and_requires_only_its_http_dependencies(wheel):
    names, fields = metadata(wheel)
    assert {name.split("/")[0] for name in names} == {"leanrl", f"{wheel.name.split('-')[0]}-{fields['Version']}.dist-info"}
    assert {Requirement(line).name for line in fields.get_all("Requires-Dist")} == HTTP_DEPENDENCIES
    assert "leanrl/cli.py" in names and not any(name.endswith("pyproject.toml") for name in names)


def test_it_runs_in_a_fresh_environment_with_nothing_but_the_wheel_and_its_dependencies(wheel, tmp_path):
    environment = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=120)
    (site_packages,) = environment.glob("lib/python*/site-packages")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--target", str(site_packages), str(wheel)], check=True, capture_output=True, timeout=300)
    for name in dependency_closure(HTTP_DEPENDENCIES):
        installed = distribution(name)
        for file in installed.files or []:
            if file.parts[0] == ".." or "__pycache__" in file.parts:
                continue  # console scripts and compiled files: not needed to import
            source = Path(installed.locate_file(file))
            if source.is_file():
                (site_packages / file).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, site_packages / file)

    python = environment / "bin" / "python"
    probe = ("import importlib.util, sys, leanrl.cli; "
             "print(*sorted({name.split('.')[0] for name in sys.modules} & "
             "{'trainer', 'django', 'ninja', 'pydantic', 'accounts', 'config', 'promptsets', 'proofs', 'runs'})); "
             "print(*[name for name in ('trainer', 'django', 'runs') if importlib.util.find_spec(name)])")
    # -I: no PYTHONPATH, no user site, not the current folder; the fresh environment's own site-packages only.
    imported = subprocess.run([str(python), "-I", "-c", probe], capture_output=True, text=True, timeout=120,
                              cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.splitlines() == ["", ""], f"loaded, or could load: {imported.stdout}"

    helped = subprocess.run([str(python), "-I", "-m", "leanrl", "runs", "launch", "--help"], capture_output=True,
                            text=True, timeout=120, cwd=tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "FIELD=VALUE" in helped.stdout
