"""Print the entries of a hashed lock file (deploy/lock.sh) for the named packages only, hashes included.

The platform image builds the docs site in a stage of its own (deploy/docker/platform.Dockerfile) with
MkDocs and the trainer's config schema, and nothing else of requirements-dev.lock (no torch): installed
with --require-hashes --no-deps, the same bytes as every other machine gets, and a name missing from the
lock is an error here rather than an unpinned download there.

    python deploy/lock_subset.py requirements-dev.lock deploy/docs-packages.txt > docs.lock
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def entries(lock_text: str) -> dict[str, str]:
    """Each package of the lock → its entry: the `name==version \\` line and its hash lines (comments dropped)."""
    found: dict[str, str] = {}
    name = None
    for line in lock_text.splitlines():
        pinned = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+", line)
        if pinned:
            name = normalised(pinned.group(1))
            found[name] = line
        elif name and line.startswith("    --hash="):
            found[name] += "\n" + line
        elif not line.startswith(" "):
            name = None
    return found


def subset(lock_text: str, names: list[str]) -> str:
    available = entries(lock_text)
    missing = [name for name in names if normalised(name) not in available]
    if missing:
        raise SystemExit(f"lock_subset: not in the lock: {', '.join(missing)}; add them to requirements-dev.txt "
                         "and run deploy/lock.sh, or drop them from the list")
    return "\n".join(available[normalised(name)] for name in names) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit("usage: python deploy/lock_subset.py LOCK_FILE PACKAGE_LIST")
    lock, listing = (Path(arg) for arg in argv)
    names = [line.split("#", 1)[0].strip() for line in listing.read_text().splitlines()]
    sys.stdout.write(subset(lock.read_text(), [name for name in names if name]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
