"""Every install (the local .venv, CI, the Docker images) comes from a lock file that pins every
package, dependencies included, with its hashes; the locks agree with the requirements they are
made from; runtime and development packages are apart; CPU and GPU nodes share one transformers."""

import re
from pathlib import Path

import pytest

REPO_DIR = Path(__file__).resolve().parents[2]
REQUIREMENTS = ["requirements.txt", "requirements-dev.txt", "requirements-gpu.txt"]
LOCKS = {"requirements.lock": ["requirements.txt"], "requirements-dev.lock": ["requirements.txt", "requirements-dev.txt"],
         "requirements-gpu.lock": ["requirements.txt", "requirements-gpu.txt"]}
PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)(?:\[[\w,]+\])?==(?P<version>[\w.+]+)$")


def requirement_lines(name: str) -> list[str]:
    return [line.split("#")[0].strip() for line in (REPO_DIR / name).read_text().splitlines()
            if line.split("#")[0].strip() and not line.startswith("-r ")]


def locked(name: str) -> dict[str, tuple[str, int]]:
    """Package → (version, number of hashes) of a lock file."""
    entries, current = {}, None
    for line in (REPO_DIR / name).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([\w.+]+)", line)
        if match:
            current = match.group(1).lower().replace("_", "-")
            entries[current] = (match.group(2), 0)
        elif "--hash=sha256:" in line and current:
            version, hashes = entries[current]
            entries[current] = (version, hashes + 1)
    return entries


def normal(name: str) -> str:
    return name.lower().replace("_", "-")


@pytest.mark.parametrize("name", REQUIREMENTS)
def test_every_requirement_is_pinned_to_one_version(name):
    loose = [line for line in requirement_lines(name) if not PIN.match(line)]
    assert loose == [], f"{name}: pin these with ==: {loose}"


@pytest.mark.parametrize("lock", LOCKS)
def test_every_locked_package_carries_its_hashes(lock):
    entries = locked(lock)
    assert len(entries) > 50
    unhashed = [package for package, (_, hashes) in entries.items() if hashes == 0]
    assert unhashed == [], f"{lock}: no hash for {unhashed}; rerun deploy/lock.sh"


@pytest.mark.parametrize("lock, sources", LOCKS.items())
def test_each_lock_holds_its_requirements_at_their_versions(lock, sources):
    entries = locked(lock)
    for source in sources:
        for line in requirement_lines(source):
            match = PIN.match(line)
            name, version = normal(match["name"]), match["version"]
            assert entries.get(name, (None,))[0] == version, (
                f"{lock} has {name} {entries.get(name, ('missing',))[0]}, {source} asks for {version}: "
                "rerun deploy/lock.sh")


def test_cpu_and_gpu_nodes_run_the_same_transformers_and_torch_release():
    cpu, gpu = locked("requirements.lock"), locked("requirements-gpu.lock")
    assert cpu["transformers"][0] == gpu["transformers"][0]
    assert cpu["torch"][0] == "2.13.0+cpu" and gpu["torch"][0] == "2.13.0"
    assert "vllm" in gpu and "vllm" not in cpu


def test_images_carry_no_test_tools():
    for lock in ("requirements.lock", "requirements-gpu.lock"):
        entries = locked(lock)
        assert not {"pytest", "playwright", "hypothesis", "pytest-django"} & set(entries), lock


def test_bootstrap_ci_and_images_install_from_the_locks_with_hashes():
    bootstrap = (REPO_DIR / "deploy" / "bootstrap.sh").read_text()
    assert "--require-hashes --no-deps -r requirements-dev.lock" in bootstrap
    docker = REPO_DIR / "deploy" / "docker"
    assert "--require-hashes" in (docker / "platform.Dockerfile").read_text()
    assert "-r requirements.lock" in (docker / "platform.Dockerfile").read_text()
    assert "--require-hashes --no-deps -r requirements-gpu.lock" in (docker / "ray-gpu.Dockerfile").read_text()
    for path in docker.glob("*.Dockerfile"):
        assert not re.search(r"pip install[^\n]*-r requirements[-\w]*\.txt", path.read_text()), path.name
